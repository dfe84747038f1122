//! The freeze-free variant (seed 002's synchronous write-protect): the cut is the moment
//! every page of the arena is write-protected; afterwards a page keeps its cut contents
//! until its first change, because that change faults and the handler thread copies the
//! page out (into a bounded side buffer) before it lifts the protection. The workers then
//! stream the arena while the executor keeps serving, taking each copied-out page from the
//! side buffer instead of the arena. Nothing is re-sent and there is no final dirty set, so
//! the pause does not depend on the write rate.
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
//! the handler (and so the faulting executor) waits until the workers stream the chunks
//! that hold buffered pages and free their slots: memory stays bounded whatever the write
//! rate, at the price of executor stalls under a write storm (the seed's trade-off).
//! Once a chunk is streamed the worker lifts the protection of the whole chunk, so later
//! writes there no longer fault.

use super::uffd::SyncWp;
use super::{range_jobs, stream_jobs_with, Job, Outcome, Progress, RegionView, SnapError};
use super::{PauseGate, SnapParams};
use crate::arena::PAGE_BYTES;
use crate::persistence::snapshot::format::{CutMode, ImageWriter, CHUNK_BYTES};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
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

fn handle_fault(t: &SyncWp, sh: &Shared, view: RegionView, page: u64) {
    {
        let mut st = sh.lock();
        match st.phase {
            Phase::Arming => st.rearm.push(page),
            Phase::Cut { end } if page < end => {
                let chunk = page as usize / CHUNK_BYTES;
                loop {
                    if st.streamed[chunk] || st.side.contains_key(&page) {
                        break;
                    }
                    if let Some(slot) = st.free.pop() {
                        // SAFETY: the page is still protected and its only writer (the
                        // executor) is blocked on this very fault, so it holds the cut's
                        // bytes; the slot lies inside the side buffer and is ours.
                        unsafe {
                            std::ptr::copy_nonoverlapping(
                                (view.base + page as usize) as *const u8,
                                (sh.side_base + slot as usize * PAGE_BYTES) as *mut u8,
                                PAGE_BYTES,
                            )
                        };
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

fn handler_loop(t: &SyncWp, sh: &Shared, view: RegionView) {
    let mut faults = Vec::with_capacity(64);
    while !sh.stop.load(Ordering::Acquire) {
        faults.clear();
        if let Err(e) = t.read_faults(&mut faults, 20) {
            sh.lock().error.get_or_insert_with(|| e.to_string());
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        for &p in &faults {
            handle_fault(t, sh, view, p);
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
    view: RegionView,
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
            .spawn_scoped(s, || handler_loop(&t, &sh, view))
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
    view: RegionView,
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
    let pause_us = guard.started.elapsed().as_micros() as u64;
    drop(guard);
    armed?;
    // Stream the arena as it was at the cut.
    let mut jobs: Vec<Job> = Vec::new();
    range_jobs(view, 0, final_end, &mut jobs);
    let fixup = |job: &Job, raw: &mut [u8]| {
        let off = job.extents[0].offset;
        // The arena bytes were read before the lock is taken: a page written after its
        // copy-out is found in the side map below (it was inserted before the unprotect
        // that let the write happen).
        std::sync::atomic::fence(Ordering::SeqCst);
        let mut st = sh.lock();
        if !st.side.is_empty() {
            for (i, pg) in (off..off + raw.len() as u64)
                .step_by(PAGE_BYTES)
                .enumerate()
            {
                if let Some(slot) = st.side.remove(&pg) {
                    // SAFETY: the slot holds a page copied by the handler under this lock.
                    let src = unsafe {
                        std::slice::from_raw_parts(
                            (sh.side_base + slot as usize * PAGE_BYTES) as *const u8,
                            PAGE_BYTES,
                        )
                    };
                    raw[i * PAGE_BYTES..(i + 1) * PAGE_BYTES].copy_from_slice(src);
                    st.free.push(slot);
                }
            }
        }
        st.streamed[off as usize / CHUNK_BYTES] = true;
        drop(st);
        sh.cv.notify_all();
        // Streamed: later writes to this chunk need no copy, so stop them faulting.
        if let Err(e) = t.unprotect(off, raw.len() as u64) {
            sh.lock().error.get_or_insert_with(|| e.to_string());
        }
    };
    stream_jobs_with(&jobs, p.threads, w, cancel, &fixup)?;
    check_error(sh)?;
    let (peak, waits) = {
        let st = sh.lock();
        (st.used_peak, st.waits)
    };
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
            bytes_written: 0,
            passes: rounds + 1,
            pause_us,
            extra_bytes: (peak * PAGE_BYTES) as u64,
            fallback_reason: None,
        },
        final_end,
    ))
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
