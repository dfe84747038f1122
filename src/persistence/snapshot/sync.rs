//! The freeze-free variant (synchronous write-protect): the cut is the moment
//! every page of the arena is write-protected; afterwards a page keeps its cut contents
//! until its first change, because that change faults and the handler thread copies the
//! page out (into a bounded side buffer) before it lifts the protection. Workers then stream
//! the arena while the executor keeps serving, taking copied-out pages from the side buffer
//! instead of the arena, and write batches of copied-out pages as records of their own when
//! the buffer fills (see [`stream_cut`]). Nothing is re-sent and there is no final dirty
//! set, so the pause does not depend on the write rate.
//!
//! **Arming without an O(dataset) pause.** Protecting gigabytes takes milliseconds of
//! kernel page-table walking, so it runs while the executor serves: a write to a page that
//! is already protected faults, and before the cut the handler just notes the page and
//! unprotects it (the *rearm* list). Rounds re-protect the rearm list (one
//! `UFFDIO_WRITEPROTECT` per run of pages) until it is small; then, at a command boundary,
//! the pause re-protects what is left and the growth of the arena since, and flips the
//! handler to copy-out mode. The pause is O(pages written since the last round). The
//! rounds converge fast whatever the client write rate: every write to a protected page
//! costs the executor a round trip to the handler (several µs), while re-protecting it
//! costs one short ioctl, so the rearm list shrinks by a large factor every round.
//!
//! **Backpressure.** The side buffer holds at most [`SIDE_BUFFER_BYTES`]. When it is full,
//! the handler (and so the faulting executor) waits until a worker drains a batch into the
//! image: memory stays bounded whatever the write rate, at the price of executor stalls
//! when writes to fresh pages outpace compression (the seed's trade-off). Once a chunk is
//! streamed the worker lifts the protection of the whole chunk, so later writes there no
//! longer fault.

use super::uffd::SyncWp;
use super::{Outcome, Progress, RegionView, SnapError};
use super::{PauseGate, SnapParams};
use crate::arena::PAGE_BYTES;
use crate::persistence::snapshot::format::{CutMode, Extent, ImageWriter, Record, CHUNK_BYTES};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Instant;

/// Bytes of copied-out pages held at most (then the faulting writer waits).
pub const SIDE_BUFFER_BYTES: usize = 32 << 20;
/// Re-protect rounds before the cut, at most.
const MAX_ARMING_ROUNDS: u32 = 16;
/// First guess of the cost of one `UFFDIO_WRITEPROTECT` over a short run of pages (µs),
/// replaced by the measured cost after the first round.
const REPROTECT_RUN_US_GUESS: f64 = 3.0;
/// The arena is protected in slices of this size at arming, so the handler's ioctls
/// interleave with the long walk instead of queueing behind it.
const PROTECT_SLICE_BYTES: u64 = 256 << 20;

enum Phase {
    /// Before the cut: note written pages for re-protection.
    Arming,
    /// After the cut: copy a page out before its first change (pages below `end`).
    Cut { end: u64 },
    /// Streaming finished: only unprotect.
    Done,
}

struct State {
    phase: Phase,
    rearm: Vec<u64>,
    /// Per chunk of the image: streamed already (its pages need no copy any more).
    streamed: Vec<bool>,
    /// Copied-out page (arena offset) → side buffer slot.
    side: HashMap<u64, u32>,
    free: Vec<u32>,
    used_peak: usize,
    /// Times the handler waited for a free slot (backpressure on the executor).
    waits: u64,
    /// Write faults handled, and the handler's time on them (µs), for the log.
    faults: u64,
    fault_us: u64,
    error: Option<String>,
}

struct Shared {
    st: Mutex<State>,
    cv: Condvar,
    stop: AtomicBool,
    side_base: usize,
    slots: usize,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.st.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Merges sorted page offsets into runs `(offset, len)`.
fn runs_of(mut pages: Vec<u64>) -> Vec<(u64, u64)> {
    pages.sort_unstable();
    pages.dedup();
    let mut runs: Vec<(u64, u64)> = Vec::new();
    for p in pages {
        match runs.last_mut() {
            Some((o, l)) if *o + *l == p => *l += PAGE_BYTES as u64,
            _ => runs.push((p, PAGE_BYTES as u64)),
        }
    }
    runs
}

fn handle_fault(t: &SyncWp, sh: &Shared, view: &RegionView, page: u64) {
    {
        let mut st = sh.lock();
        match st.phase {
            Phase::Arming => {
                // Noted and unprotected under the lock: the coordinator takes the list
                // under it too, so it never re-protects the page *before* this unprotect
                // (which would leave the page unprotected and off the list at the cut).
                st.rearm.push(page);
                if let Err(e) = t.unprotect(page, PAGE_BYTES as u64) {
                    st.error.get_or_insert_with(|| e.to_string());
                }
                return;
            }
            Phase::Cut { end } if page < end => {
                let chunk = page as usize / CHUNK_BYTES;
                loop {
                    // Re-checked after every wait: a failed or cancelled stream sets Done
                    // and wakes us, and no worker would ever free a slot again.
                    if !matches!(st.phase, Phase::Cut { .. })
                        || st.streamed[chunk]
                        || st.side.contains_key(&page)
                    {
                        break;
                    }
                    if let Some(slot) = st.free.pop() {
                        // SAFETY: the slot lies inside the side buffer (`slots` pages from
                        // `side_base`, alive for the whole run) and is ours: taken off the
                        // free list under the lock, so no other thread touches it.
                        let dst = unsafe {
                            std::slice::from_raw_parts_mut(
                                (sh.side_base + slot as usize * PAGE_BYTES) as *mut u8,
                                PAGE_BYTES,
                            )
                        };
                        // The page is still protected and every writer to it (the
                        // executor, or an I/O thread's receive) is held on this very
                        // fault, so it holds the cut's bytes; copied through racy_copy
                        // anyway, so that no snapshot code loads from the region.
                        if let Err(e) = view.copy(page, dst) {
                            st.free.push(slot);
                            st.error.get_or_insert_with(|| e.to_string());
                            break;
                        }
                        st.side.insert(page, slot);
                        let used = sh.slots - st.free.len();
                        st.used_peak = st.used_peak.max(used);
                        break;
                    }
                    st.waits += 1;
                    st = sh.cv.wait(st).unwrap_or_else(|e| e.into_inner());
                }
            }
            _ => {}
        }
    }
    if let Err(e) = t.unprotect(page, PAGE_BYTES as u64) {
        // The writer stays blocked until the range is unregistered; the coordinator sees
        // the error, fails the snapshot and unregisters.
        let mut st = sh.lock();
        st.error.get_or_insert_with(|| e.to_string());
    }
}

fn handler_loop(t: &SyncWp, sh: &Shared, view: &RegionView) {
    let mut faults = Vec::with_capacity(64);
    while !sh.stop.load(Ordering::Acquire) {
        faults.clear();
        if let Err(e) = t.read_faults(&mut faults, 20) {
            sh.lock().error.get_or_insert_with(|| e.to_string());
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let started = Instant::now();
        for &p in &faults {
            handle_fault(t, sh, view, p);
        }
        if !faults.is_empty() {
            let mut st = sh.lock();
            st.faults += faults.len() as u64;
            st.fault_us += started.elapsed().as_micros() as u64;
        }
    }
}

fn protect_sliced(t: &SyncWp, start: u64, end: u64) -> std::io::Result<()> {
    let mut off = start;
    while off < end {
        let len = (end - off).min(PROTECT_SLICE_BYTES);
        t.protect(off, len)?;
        off += len;
    }
    Ok(())
}

fn check_error(sh: &Shared) -> Result<(), SnapError> {
    match sh.lock().error.take() {
        Some(e) => Err(SnapError::Io(std::io::Error::other(e))),
        None => Ok(()),
    }
}

/// Runs a whole freeze-free snapshot into `w` with the tracker `t` (already registered).
/// Returns the outcome and the arena bytes of the image.
pub(super) fn run_sync(
    view: &RegionView,
    p: &SnapParams,
    t: SyncWp,
    gate: &PauseGate,
    cancel: &AtomicBool,
    progress: &Progress,
    w: &mut ImageWriter,
) -> Result<(Outcome, u64), SnapError> {
    // Zeroed lazily by the kernel: only slots actually used become resident.
    let side = vec![0u8; SIDE_BUFFER_BYTES];
    let slots = SIDE_BUFFER_BYTES / PAGE_BYTES;
    let sh = Shared {
        st: Mutex::new(State {
            phase: Phase::Arming,
            rearm: Vec::new(),
            streamed: Vec::new(),
            side: HashMap::new(),
            free: (0..slots as u32).rev().collect(),
            used_peak: 0,
            waits: 0,
            faults: 0,
            fault_us: 0,
            error: None,
        }),
        cv: Condvar::new(),
        stop: AtomicBool::new(false),
        side_base: side.as_ptr() as usize,
        slots,
    };
    let result = std::thread::scope(|s| {
        let handler = std::thread::Builder::new()
            .name("cairn-snap-wp".into())
            .spawn_scoped(s, || {
                // The executor waits on this thread (its CPU is idle meanwhile): it may
                // run there, unlike the rest of the snapshot (see `OnCpu::away_from`).
                let _wide = p.wide_cpus.as_ref().map(super::OnCpu::set);
                handler_loop(&t, &sh, view)
            })
            .map_err(SnapError::Io)?;
        let r = sync_body(view, p, &t, &sh, gate, cancel, progress, w);
        // Unregister while the handler still serves faults: this lifts every protection
        // and wakes any writer still blocked, then the handler may go.
        sh.lock().phase = Phase::Done;
        sh.cv.notify_all();
        t.unregister();
        sh.stop.store(true, Ordering::Release);
        let _ = handler.join();
        r
    });
    drop(side);
    result
}

#[allow(clippy::too_many_arguments)]
fn sync_body(
    view: &RegionView,
    p: &SnapParams,
    t: &SyncWp,
    sh: &Shared,
    gate: &PauseGate,
    cancel: &AtomicBool,
    progress: &Progress,
    w: &mut ImageWriter,
) -> Result<(Outcome, u64), SnapError> {
    // Arming: protect everything in use while the executor serves.
    let mut end = view.end();
    protect_sliced(t, 0, end)?;
    let mut per_run_us = REPROTECT_RUN_US_GUESS;
    let half_budget = p.pause_budget_us as f64 / 2.0;
    let mut rounds = 0u32;
    loop {
        if cancel.load(Ordering::Relaxed) {
            return Err(SnapError::Cancelled);
        }
        check_error(sh)?;
        let new_end = view.end();
        if new_end > end {
            protect_sliced(t, end, new_end)?;
            end = new_end;
        }
        let runs = runs_of(std::mem::take(&mut sh.lock().rearm));
        let n = runs.len();
        let started = Instant::now();
        for &(o, l) in &runs {
            t.protect(o, l)?;
        }
        if n > 0 {
            let measured = started.elapsed().as_secs_f64() * 1e6 / n as f64;
            per_run_us = (per_run_us + measured) / 2.0;
        }
        rounds += 1;
        progress.passes.store(rounds as usize, Ordering::Relaxed);
        // What is written during a round this short is smaller still: pause now.
        if n as f64 * per_run_us <= half_budget || rounds >= MAX_ARMING_ROUNDS {
            break;
        }
    }
    // The cut: re-protect the last written pages and the growth, flip the handler.
    let guard = gate.pause(cancel).ok_or(SnapError::Cancelled)?;
    let final_end = view.end();
    let runs = runs_of(std::mem::take(&mut sh.lock().rearm));
    let mut armed = Ok(());
    for &(o, l) in &runs {
        armed = armed.and_then(|_| t.protect(o, l));
    }
    if final_end > end {
        armed = armed.and_then(|_| t.protect(end, final_end - end));
    }
    if armed.is_ok() {
        let mut st = sh.lock();
        st.phase = Phase::Cut { end: final_end };
        st.streamed = vec![false; (final_end as usize).div_ceil(CHUNK_BYTES)];
    }
    let dirty_at_cut = gate.dirty_at_park();
    let keys = gate.keys_at_park();
    let repl_offset = gate.repl_offset_at_park();
    let aof_lsn = super::at_cut(p, gate);
    let pause_us = guard.started.elapsed().as_micros() as u64;
    drop(guard);
    armed?;
    // Stream the arena as it was at the cut.
    // Niced: the fault handler, which the executor waits on, must win the CPU.
    let nice = super::nice_override().unwrap_or(super::WORKER_NICE);
    let side = UffdSide {
        sh,
        t,
        drained: (0..(final_end as usize).div_ceil(PAGE_BYTES).div_ceil(64))
            .map(|_| AtomicU64::new(0))
            .collect(),
    };
    stream_cut(view, p, &side, final_end, w, cancel, nice)?;
    check_error(sh)?;
    let (peak, waits, faults, fault_us) = {
        let st = sh.lock();
        (st.used_peak, st.waits, st.faults, st.fault_us)
    };
    crate::notice!(
        "Snapshot (freeze-free): {rounds} arming rounds, {faults} write faults handled in {fault_us} us, side buffer peak {} KiB",
        peak * PAGE_BYTES / 1024
    );
    if waits > 0 {
        crate::notice!(
            "Snapshot side buffer was full {waits} times: the executor waited for the stream"
        );
    }
    progress
        .passes
        .store(rounds as usize + 1, Ordering::Relaxed);
    Ok((
        Outcome {
            mode: CutMode::UffdSync,
            dirty_at_cut,
            keys,
            repl_offset,
            aof_lsn,
            bytes_written: 0,
            passes: rounds + 1,
            pause_us,
            extra_bytes: (peak * PAGE_BYTES) as u64,
            fallback_reason: None,
        },
        final_end,
    ))
}

/// Side-buffer pages written out per drain record (one record: at most 256 extents).
pub(super) const DRAIN_PAGES: usize = 256;

/// What a worker does next.
enum Work {
    /// Stream chunk `i` of the arena.
    Chunk(usize),
    /// Write these copied-out pages (already in the worker's buffer, in this order).
    Drain(Vec<Extent>),
}

/// Streams `[0, end)` as it was at the cut. Workers take, in order of preference, a
/// batch of copied-out pages (once the side buffer holds [`DRAIN_PAGES`]) or the next
/// chunk; once no chunk is left, the rest of the side buffer in batches of any size. Every
/// page is in exactly one record (how depends on the side buffer, see
/// [`SideBuffer::chunk_read`]), so records are disjoint and written in completion order.
/// Draining frees side-buffer slots at the speed of compression, not of the stream's
/// position in the arena, so a writer waits for a slot only while the workers cannot keep
/// up with it.
pub(super) fn stream_cut(
    view: &RegionView,
    p: &SnapParams,
    sh: &dyn SideBuffer,
    end: u64,
    w: &mut ImageWriter,
    cancel: &AtomicBool,
    worker_nice: libc::c_int,
) -> Result<(), SnapError> {
    let chunks = (end as usize).div_ceil(CHUNK_BYTES);
    let next_chunk = std::sync::atomic::AtomicUsize::new(0);
    // Chunks read and claimed: once all are, no writer can copy a page out any more.
    let chunks_done = std::sync::atomic::AtomicUsize::new(0);
    let threads = p.threads.clamp(1, 64);
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| -> Result<(), SnapError> {
        // Bounded: workers run at most a few records ahead of the file.
        let (tx, rx) = std::sync::mpsc::sync_channel::<Record>(threads * 2);
        for _ in 0..threads {
            let tx = tx.clone();
            let (next_chunk, chunks_done, stop) = (&next_chunk, &chunks_done, &stop);
            s.spawn(move || {
                super::set_nice(worker_nice);
                let mut buf = vec![0u8; CHUNK_BYTES];
                while !stop.load(Ordering::Relaxed) && !cancel.load(Ordering::Relaxed) {
                    let work = match sh.take_batch(&mut buf, DRAIN_PAGES) {
                        Some(extents) => Work::Drain(extents),
                        None if next_chunk.load(Ordering::Relaxed) < chunks => {
                            let i = next_chunk.fetch_add(1, Ordering::Relaxed);
                            if i >= chunks {
                                continue;
                            }
                            Work::Chunk(i)
                        }
                        // No chunk left: copied-out pages still waiting go out in
                        // batches of any size, until every chunk is claimed and the
                        // side buffer is empty.
                        None => match sh.take_batch(&mut buf, 1) {
                            Some(extents) => Work::Drain(extents),
                            None => {
                                if chunks_done.load(Ordering::SeqCst) == chunks && !sh.pending() {
                                    break;
                                }
                                std::thread::sleep(std::time::Duration::from_micros(100));
                                continue;
                            }
                        },
                    };
                    let rec = match work {
                        Work::Drain(extents) => {
                            let n = extents.len() * PAGE_BYTES;
                            Some(Record::encode(extents, &buf[..n]))
                        }
                        Work::Chunk(i) => {
                            let r = stream_chunk(view, sh, end, i, &mut buf);
                            chunks_done.fetch_add(1, Ordering::SeqCst);
                            r
                        }
                    };
                    if let Some(rec) = rec {
                        if tx.send(rec).is_err() {
                            break;
                        }
                    }
                }
            });
        }
        drop(tx);
        for rec in rx.iter() {
            if cancel.load(Ordering::Relaxed) {
                stop.store(true, Ordering::Relaxed);
                return Err(SnapError::Cancelled);
            }
            if let Err(e) = w.write_record(&rec) {
                stop.store(true, Ordering::Relaxed);
                return Err(e.into());
            }
        }
        // Workers also leave on a cancel, without a record: not a whole image.
        if cancel.load(Ordering::Relaxed) {
            return Err(SnapError::Cancelled);
        }
        Ok(())
    })
}

/// Where the copied-out pages of a freeze-free capture wait for the stream: the
/// write-protect handler's side buffer here, or the arena's copy-before-write capture
/// (`snapshot::cow`). Both keep the same protocol (see [`stream_cut`]).
pub(super) trait SideBuffer: Sync {
    /// When the side buffer holds at least `min_pages` pages: moves up to [`DRAIN_PAGES`]
    /// into `buf` (in offset order), frees their slots, marks them drained, wakes waiting
    /// writers and returns their extents.
    fn take_batch(&self, buf: &mut [u8], min_pages: usize) -> Option<Vec<Extent>>;
    /// Copied-out pages still have to go to the image (false once the capture failed).
    fn pending(&self) -> bool;
    /// `buf[..len]` was read from the region at `off` (chunk of the image): clears `keep`
    /// for the pages whose cut bytes go out of the side buffer instead, fixes up the
    /// rest where needed and marks the chunk streamed (later writes to it need no copy).
    /// The write-protect variant replaces pages it holds copies of by those copies and
    /// leaves out drained ones; the copy-before-write variant leaves out every page a
    /// writer claimed before the worker (see `arena::cow`).
    fn chunk_read(&self, off: u64, len: usize, buf: &mut [u8], keep: &mut [bool]);
    /// Records an error: the snapshot fails with it.
    fn fail(&self, e: String);
}

fn is_drained(drained: &[AtomicU64], pg: u64) -> bool {
    let n = pg as usize / PAGE_BYTES;
    drained[n / 64].load(Ordering::Relaxed) & (1 << (n % 64)) != 0
}

fn set_drained(drained: &[AtomicU64], pg: u64) {
    let n = pg as usize / PAGE_BYTES;
    drained[n / 64].fetch_or(1 << (n % 64), Ordering::Relaxed);
}

/// Moves up to [`DRAIN_PAGES`] copied-out pages into `buf` in page order, marks them
/// drained and returns their extents; None while fewer than `min_pages` are waiting.
fn drain_side(
    s: &mut UffdSlots,
    buf: &mut [u8],
    drained: &[AtomicU64],
    min_pages: usize,
) -> Option<Vec<Extent>> {
    if s.side().len() < min_pages.max(1) {
        return None;
    }
    let mut batch: Vec<(u64, u32)> = s
        .side()
        .iter()
        .take(DRAIN_PAGES)
        .map(|(&pg, &slot)| (pg, slot))
        .collect();
    batch.sort_unstable();
    let mut extents = Vec::with_capacity(batch.len());
    for (i, &(pg, slot)) in batch.iter().enumerate() {
        s.side().remove(&pg);
        s.release(slot, &mut buf[i * PAGE_BYTES..(i + 1) * PAGE_BYTES]);
        set_drained(drained, pg);
        extents.push(Extent {
            offset: pg,
            len: PAGE_BYTES as u32,
        });
    }
    Some(extents)
}

/// `buf[..len]` was read from the region at `off`: replaces the pages the side buffer
/// holds by their copies and clears `keep` for pages already drained.
fn replace_from_side(
    s: &mut UffdSlots,
    off: u64,
    len: usize,
    buf: &mut [u8],
    drained: &[AtomicU64],
    keep: &mut [bool],
) {
    for (k, pg) in (off..off + len as u64).step_by(PAGE_BYTES).enumerate() {
        if is_drained(drained, pg) {
            keep[k] = false;
        } else if let Some(slot) = s.side().remove(&pg) {
            s.release(slot, &mut buf[k * PAGE_BYTES..(k + 1) * PAGE_BYTES]);
        }
    }
}

/// The write-protect variant's side buffer and tracker.
struct UffdSide<'a> {
    sh: &'a Shared,
    t: &'a SyncWp,
    /// One bit per page: drained (written from the side buffer), so its chunk leaves it
    /// out.
    drained: Vec<AtomicU64>,
}

/// The write-protect variant's bookkeeping under its lock.
struct UffdSlots<'a> {
    st: &'a mut State,
    side_base: usize,
}

impl UffdSlots<'_> {
    fn side(&mut self) -> &mut HashMap<u64, u32> {
        &mut self.st.side
    }
    /// Copies the page in `slot` into `dst` and frees the slot.
    fn release(&mut self, slot: u32, dst: &mut [u8]) {
        // SAFETY: the slot holds a page the handler copied under the lock the caller
        // holds (`st` borrows its guard), inside the side buffer.
        let src = unsafe {
            std::slice::from_raw_parts(
                (self.side_base + slot as usize * PAGE_BYTES) as *const u8,
                PAGE_BYTES,
            )
        };
        dst.copy_from_slice(src);
        self.st.free.push(slot);
    }
}

impl SideBuffer for UffdSide<'_> {
    fn take_batch(&self, buf: &mut [u8], min_pages: usize) -> Option<Vec<Extent>> {
        let sh = self.sh;
        let mut st = sh.lock();
        let mut slots = UffdSlots {
            st: &mut st,
            side_base: sh.side_base,
        };
        let extents = drain_side(&mut slots, buf, &self.drained, min_pages)?;
        drop(st);
        sh.cv.notify_all();
        Some(extents)
    }

    fn chunk_read(&self, off: u64, len: usize, buf: &mut [u8], keep: &mut [bool]) {
        let sh = self.sh;
        {
            let mut st = sh.lock();
            let mut slots = UffdSlots {
                st: &mut st,
                side_base: sh.side_base,
            };
            replace_from_side(&mut slots, off, len, buf, &self.drained, keep);
            st.streamed[off as usize / CHUNK_BYTES] = true;
        }
        sh.cv.notify_all();
        // Streamed: later writes to this chunk need no copy, so stop them faulting.
        if let Err(e) = self.t.unprotect(off, len as u64) {
            self.fail(e.to_string());
        }
    }

    fn pending(&self) -> bool {
        let st = self.sh.lock();
        !st.side.is_empty() && st.error.is_none()
    }

    fn fail(&self, e: String) {
        self.sh.lock().error.get_or_insert(e);
    }
}

/// Copies chunk `i` and turns it into a record of its pages as they were at the cut,
/// leaving out drained pages. None when every page of it was drained.
fn stream_chunk(
    view: &RegionView,
    sh: &dyn SideBuffer,
    end: u64,
    i: usize,
    buf: &mut [u8],
) -> Option<Record> {
    let off = (i * CHUNK_BYTES) as u64;
    let len = (end - off).min(CHUNK_BYTES as u64) as usize;
    // Pages not copied out yet hold the cut's bytes; a page written after its copy-out
    // may be read torn here (hence racy_copy) and is replaced below.
    if let Err(e) = view.copy(off, &mut buf[..len]) {
        sh.fail(e.to_string());
        return None;
    }
    // The arena bytes were read before the side buffer's lock is taken: a page written
    // after its copy-out is in the side map or drained (both happen before the write).
    std::sync::atomic::fence(Ordering::SeqCst);
    let mut keep: Vec<bool> = vec![true; len / PAGE_BYTES];
    sh.chunk_read(off, len, buf, &mut keep);
    if keep.iter().all(|&k| k) {
        return Some(Record::encode(
            vec![Extent {
                offset: off,
                len: len as u32,
            }],
            &buf[..len],
        ));
    }
    // Compact the kept pages' bytes to the front, as runs.
    let mut extents: Vec<Extent> = Vec::new();
    let mut at = 0usize;
    for (k, &kept) in keep.iter().enumerate() {
        if !kept {
            continue;
        }
        buf.copy_within(k * PAGE_BYTES..(k + 1) * PAGE_BYTES, at);
        at += PAGE_BYTES;
        let pg = off + (k * PAGE_BYTES) as u64;
        match extents.last_mut() {
            Some(e) if e.offset + e.len as u64 == pg => e.len += PAGE_BYTES as u32,
            _ => extents.push(Extent {
                offset: pg,
                len: PAGE_BYTES as u32,
            }),
        }
    }
    (!extents.is_empty()).then(|| Record::encode(extents, &buf[..at]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_merge_adjacent_pages() {
        let p = PAGE_BYTES as u64;
        assert_eq!(
            runs_of(vec![5 * p, 3 * p, 4 * p, 9 * p, 4 * p]),
            vec![(3 * p, 3 * p), (9 * p, p)]
        );
        assert!(runs_of(Vec::new()).is_empty());
    }
}
