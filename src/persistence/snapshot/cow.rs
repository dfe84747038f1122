//! The copy-before-write variant (`snapshot-mode cow`): freeze-free like [`super::sync`],
//! but the first write to a page after the cut is caught by the arena's own write hook
//! (`arena::cow`) instead of a write-protect fault. The cut is a flag flipped at a
//! command boundary: no page is protected, nothing is walked, so the pause does not grow
//! with the dataset. The stream is [`super::sync::stream_cut`]'s, over the arena
//! capture's side buffer.
//!
//! **Verification** (`snapshot-verify-cow`, for tests): the cut also write-protects the
//! arena with `WP_ASYNC` tracking, and the end of the capture lists the pages written
//! since; a page written there that never passed through the hook fails the snapshot.

use super::sync::{SideBuffer, DRAIN_PAGES};
use super::{Outcome, Progress, RegionView, SnapError};
use super::{PauseGate, SnapParams};
use crate::arena::cow::{Capture, Cut};
use crate::arena::PAGE_BYTES;
use crate::persistence::snapshot::format::{CutMode, Extent, ImageWriter};
use std::sync::atomic::{AtomicBool, Ordering};

/// Bytes of copied-out pages held at most (then the writer waits for the stream).
pub const SIDE_BUFFER_BYTES: usize = super::sync::SIDE_BUFFER_BYTES;

/// The copy-before-write cut replaces no page in a chunk: a page a writer claimed first
/// is left out of its chunk (and goes out of the side buffer), one the worker claimed was
/// read with its cut bytes.
impl SideBuffer for Cut {
    fn take_batch(&self, buf: &mut [u8], min_pages: usize) -> Option<Vec<Extent>> {
        let room = buf.len().min(DRAIN_PAGES * PAGE_BYTES);
        let pages = self.drain_into(&mut buf[..room], min_pages)?;
        Some(
            pages
                .into_iter()
                .map(|offset| Extent {
                    offset,
                    len: PAGE_BYTES as u32,
                })
                .collect(),
        )
    }

    fn pending(&self) -> bool {
        Cut::pending(self)
    }

    fn chunk_read(&self, off: u64, len: usize, _buf: &mut [u8], keep: &mut [bool]) {
        self.claim_for_stream(off, len as u64, keep);
    }

    fn fail(&self, e: String) {
        Cut::fail(self, e);
    }
}

/// Runs a whole copy-before-write snapshot into `w` over the arena's capture `c`.
/// Returns the outcome and the arena bytes of the image.
pub(super) fn run_cow(
    view: &RegionView,
    p: &SnapParams,
    c: &Capture,
    gate: &PauseGate,
    cancel: &AtomicBool,
    progress: &Progress,
    w: &mut ImageWriter,
) -> Result<(Outcome, u64), SnapError> {
    let mut tracker = None;
    let guard = gate.pause(cancel).ok_or(SnapError::Cancelled)?;
    let end = view.end();
    // The writers' copy-outs are plain copies: the capture's protocol guarantees no
    // thread writes a page while it is copied out (see `cow::region_copy`).
    let installed = c.install(
        end,
        SIDE_BUFFER_BYTES,
        crate::arena::cow::region_copy(view.base_addr(), view.reserved_bytes()),
        p.verify_cow,
    );
    let mut armed: Result<(), SnapError> = if installed {
        Ok(())
    } else {
        Err(SnapError::Io(std::io::Error::other(
            "the arena's capture was used by an earlier snapshot",
        )))
    };
    if installed && p.verify_cow {
        // After the install: a write between the two is not checked, but none that the
        // hook saw can be reported as unseen.
        armed = super::uffd::WpTracker::reuse_or_new(view.base_addr(), view.reserved_bytes())
            .and_then(|mut t| {
                t.protect(0, end)?;
                tracker = Some(t);
                Ok(())
            })
            .map_err(SnapError::Io);
    }
    let dirty_at_cut = gate.dirty_at_park();
    let keys = gate.keys_at_park();
    let repl_offset = gate.repl_offset_at_park();
    let aof_lsn = super::at_cut(p, gate);
    let pause_us = guard.started.elapsed().as_micros() as u64;
    drop(guard);
    let Some(cut) = c.cut() else {
        return Err(armed.err().unwrap_or(SnapError::Cancelled));
    };
    // No handler to make room for: the workers' priority follows the live passes' rule
    // (nice 0 where they are kept off the executor's CPU; see `WORKER_NICE`).
    let nice = super::nice_override().unwrap_or(if p.wide_cpus.is_some() {
        0
    } else {
        super::WORKER_NICE
    });
    let streamed = armed.and_then(|()| super::sync::stream_cut(view, p, cut, end, w, cancel, nice));
    // Writers pass from here on, whatever happened.
    cut.finish();
    let verified = match tracker {
        Some(t) => verify(t, cut, end),
        None => Ok(()),
    };
    streamed?;
    let stats = cut.stats();
    if let Some(e) = cut.take_error() {
        return Err(SnapError::Io(std::io::Error::other(e)));
    }
    verified?;
    crate::notice!(
        "Snapshot (copy-before-write): pause {pause_us} us, {} pages copied before their first write in {} us, side buffer peak {} KiB, writers' longest wait {} us ({} over 1 ms)",
        stats.copies,
        stats.copy_ns / 1000,
        stats.used_peak * PAGE_BYTES / 1024,
        stats.wait_ns_max / 1000,
        stats.waits_over_1ms
    );
    if stats.full_waits > 0 {
        crate::notice!(
            "Snapshot side buffer was full {} times: writers waited for the stream",
            stats.full_waits
        );
    }
    progress.passes.store(1, Ordering::Relaxed);
    Ok((
        Outcome {
            mode: CutMode::Cow,
            dirty_at_cut,
            keys,
            repl_offset,
            aof_lsn,
            bytes_written: 0,
            passes: 1,
            pause_us,
            extra_bytes: (stats.used_peak * PAGE_BYTES) as u64,
            fallback_reason: None,
        },
        end,
    ))
}

/// `snapshot-verify-cow`: the pages written since the cut (tracked by `t`) must all have
/// passed through the hook.
fn verify(mut t: super::uffd::WpTracker, cut: &Cut, end: u64) -> Result<(), SnapError> {
    let mut written = Vec::new();
    let walked = t.harvest_parallel(0, end, 1, super::uffd::Reprotect::No, None, |o, l| {
        written.push((o, l))
    });
    // Unregistering lifts the protections (a check for tests: its cost does not matter).
    drop(t);
    walked?;
    let missed = cut.unseen(&written);
    if missed.is_empty() {
        return Ok(());
    }
    let pages: u64 = missed.iter().map(|r| r.1).sum::<u64>() / PAGE_BYTES as u64;
    crate::warning!(
        "snapshot-verify-cow: {pages} pages were written after the cut without passing through the copy-before-write hook (first at arena offset {})",
        missed[0].0
    );
    Err(SnapError::Io(std::io::Error::other(format!(
        "snapshot-verify-cow: {pages} pages written after the cut bypassed the copy-before-write hook (first at arena offset {})",
        missed[0].0
    ))))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An anonymous mapping of `len` bytes (freed on drop).
    struct Map(*mut u8, usize);
    impl Map {
        fn new(len: usize) -> Map {
            // SAFETY: a fresh private anonymous mapping.
            let p = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                )
            };
            assert_ne!(p, libc::MAP_FAILED);
            Map(p as *mut u8, len)
        }
    }
    impl Drop for Map {
        fn drop(&mut self) {
            // SAFETY: our mapping.
            unsafe { libc::munmap(self.0 as *mut libc::c_void, self.1) };
        }
    }

    /// A write that skips the hook after the cut is caught by the check, and one that
    /// goes through it is not.
    #[test]
    fn verification_catches_a_write_that_bypasses_the_hook() {
        let len = 64 * PAGE_BYTES;
        let m = Map::new(len);
        // Every page resident and non-zero before the cut.
        // SAFETY: our mapping, written by this thread only.
        unsafe { std::ptr::write_bytes(m.0, 1, len) };
        let view = RegionView::over_range(m.0 as usize, len);
        let run = |bypass: bool| -> Result<(), SnapError> {
            let c = Capture::new(m.0 as usize, len);
            let copier = view.clone();
            assert!(c.install(
                len as u64,
                8 * PAGE_BYTES,
                Box::new(move |off, dst: &mut [u8]| copier.copy(off, dst)),
                true
            ));
            let mut t = match super::super::uffd::WpTracker::new(m.0 as usize, len) {
                Ok(t) => t,
                Err(e) => {
                    eprintln!("userfaultfd refused here ({e}): nothing to check");
                    return Err(SnapError::Cancelled);
                }
            };
            t.protect(0, len as u64).unwrap();
            // Through the hook: page 3.
            c.before_write(3 * PAGE_BYTES, 8);
            // SAFETY: our mapping; no other thread touches it.
            unsafe { *m.0.add(3 * PAGE_BYTES) = 2 };
            if bypass {
                // SAFETY: as above.
                unsafe { *m.0.add(10 * PAGE_BYTES + 5) = 2 };
            }
            let cut = c.cut().unwrap();
            cut.finish();
            verify(t, cut, len as u64)
        };
        match run(false) {
            Err(SnapError::Cancelled) => return,
            r => assert!(r.is_ok(), "{r:?}"),
        }
        let e = run(true).expect_err("the bypassing write went unnoticed");
        assert!(
            e.to_string()
                .contains(&format!("offset {}", 10 * PAGE_BYTES)),
            "{e}"
        );
    }
}
