//! Pre-allocated, pre-written incremental files (`aof-preallocate-bytes`).
//!
//! Appending to a file changes its size and allocates blocks: every `fdatasync` then has
//! to commit a filesystem journal transaction as well as the data. Writing into blocks
//! that already exist and were written (zeroes) is a pure overwrite: the sync only flushes
//! data. A helper thread (`cairn-aof-zero`) keeps the file written ahead of the write
//! position with filler lines (`format::FILL_LINE`, 64-byte `#FILL` annotations that
//! Redis 7's loader skips too, so a killed segment still loads there), in chunks, each made durable (so its metadata is committed before
//! any log write lands there). The writer never writes past the prepared end while the
//! helper works, so the two never touch the same bytes. Recovery stops at the filler
//! (`format::scan`: filler lines or zeroes from where an entry should start to the end of
//! the file are the clean end of the log).

use super::format::FILL_LINE;
use super::uring::AlignedBuf;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// Bytes written (then synced) per step. Small, because a log `fdatasync` that meets a
/// chunk's sync on the device waits for the chunk's data too (figures: BENCHMARKS.md,
/// "AOF rewrite stall").
const CHUNK_BYTES: u64 = 2 << 20;
/// After [`Prealloc::freeze`]: refill only once less than this is left ahead of the log,
/// and then up to this much plus one chunk past it.
const FROZEN_MARGIN_BYTES: u64 = 4 << 20;
/// Unless the log is waiting for room, the helper rests this many times as long as a
/// chunk took before the next one, so its writes take at most a third of the device's
/// time and the log's syncs get the rest.
const REST_PER_BUSY: u32 = 2;
/// Zero buffer written repeatedly for a chunk.
const ZERO_BUF_BYTES: usize = 1 << 20;

struct Inner {
    /// The helper zeroes up to here.
    target: u64,
    /// [0, prepared) is allocated and written (log data, zeroes or a recycled file's old
    /// bytes).
    prepared: u64,
    failed: bool,
    stop: bool,
    /// See [`Prealloc::freeze`].
    frozen: bool,
    /// The log is waiting for room (or could not append for the lack of it): no rest
    /// between chunks until the target is reached.
    urgent: bool,
}

struct St {
    m: Mutex<Inner>,
    cv: Condvar,
}

pub struct Prealloc {
    st: Arc<St>,
    join: Option<std::thread::JoinHandle<()>>,
    /// How far ahead of the write position to keep the file prepared.
    ahead: u64,
}

fn lock(st: &St) -> std::sync::MutexGuard<'_, Inner> {
    st.m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Prealloc {
    /// Starts the helper on `file` (its own handle), whose first `prepared` bytes exist,
    /// preparing it up to `target` first; afterwards it keeps `ahead` bytes prepared
    /// beyond the log's end (see [`Prealloc::ensure`]).
    pub fn start(file: File, prepared: u64, target: u64, ahead: u64) -> std::io::Result<Self> {
        let st = Arc::new(St {
            m: Mutex::new(Inner {
                target,
                prepared,
                failed: false,
                stop: false,
                frozen: false,
                urgent: false,
            }),
            cv: Condvar::new(),
        });
        let st2 = st.clone();
        let join = std::thread::Builder::new()
            .name("cairn-aof-zero".into())
            .spawn(move || zero_loop(&st2, file))?;
        Ok(Prealloc {
            st,
            join: Some(join),
            ahead,
        })
    }

    /// Before writing `[.., end)`: waits until that range is prepared (unless the helper
    /// failed, e.g. ENOSPC: then the write simply extends the file) and, once less than
    /// half of `ahead` is left beyond it, asks the helper for `ahead` bytes more.
    ///
    /// The hysteresis matters: a helper that followed every append would extend the file
    /// (a size change) and sync a few KiB per log batch, so every log `fdatasync` would
    /// again commit a journal transaction and the disk would see two flushes per batch.
    /// Refilled in bursts, the helper's syncs happen once per `ahead / 2` bytes of log.
    pub fn ensure(&self, end: u64) {
        let mut g = lock(&self.st);
        if refill(&mut g, end, self.ahead) {
            self.st.cv.notify_all();
        }
        if g.prepared < end {
            g.urgent = true;
            self.st.cv.notify_all();
        }
        while g.prepared < end && !g.failed && !g.stop {
            g = self
                .st
                .cv
                .wait_timeout(g, Duration::from_millis(100))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    pub fn prepared(&self) -> u64 {
        lock(&self.st).prepared
    }

    /// A rewrite is running: this file is about to be retired (the log moves to a new one
    /// at the cut), or is that new one until the rewrite commits. From now on the helper
    /// refills only when the log comes within [`FROZEN_MARGIN_BYTES`] of the prepared end,
    /// a chunk past that margin at a time, instead of keeping `ahead` bytes ready: filler
    /// is megabytes written and synced, and one in flight at the cut would delay the new
    /// file's first syncs behind it on the device (held replies).
    pub fn freeze(&self) {
        lock(&self.st).frozen = true;
    }

    /// Back to keeping `ahead` bytes ready (see [`Prealloc::freeze`]).
    pub fn unfreeze(&self) {
        lock(&self.st).frozen = false;
    }

    /// Tells the helper to stop without waiting for it (it is idle unless a chunk is in
    /// progress); dropping `self` later joins it.
    pub fn stop_nowait(&self) {
        lock(&self.st).stop = true;
        self.st.cv.notify_all();
    }

    /// A handle for the executor's appends (see `writer::Lease`): [`PreallocHandle::ready`]
    /// never waits.
    pub fn handle(&self) -> PreallocHandle {
        PreallocHandle {
            st: self.st.clone(),
            ahead: self.ahead,
        }
    }

    /// Stops the helper (waits for the chunk in progress).
    pub fn stop(&mut self) {
        lock(&self.st).stop = true;
        self.st.cv.notify_all();
        if let Some(j) = self.join.take() {
            let _ = j.join();
        }
    }
}

/// The executor's view of the helper: it may ask for more and look, never wait.
pub struct PreallocHandle {
    st: Arc<St>,
    ahead: u64,
}

impl PreallocHandle {
    /// [`Prealloc::ensure`] without the wait: true when `[.., end)` may be written now
    /// (prepared, or the helper failed and appends grow the file); false when the write
    /// would pass the helper (which then overwrites it with filler) or the helper stopped.
    pub fn ready(&self, end: u64) -> bool {
        let mut g = lock(&self.st);
        if !g.stop && refill(&mut g, end, self.ahead) {
            self.st.cv.notify_all();
        }
        let ready = !g.stop && (g.prepared >= end || g.failed);
        if !ready && !g.stop {
            g.urgent = true;
            self.st.cv.notify_all();
        }
        ready
    }
}

/// Raises the helper's target when the log's end `end` comes within half of `ahead` of it,
/// to `ahead` past `end` (frozen: within [`FROZEN_MARGIN_BYTES`], and then to that margin
/// plus one chunk past `end`). True when it did.
///
/// The hysteresis matters: see [`Prealloc::ensure`].
fn refill(g: &mut Inner, end: u64, ahead: u64) -> bool {
    let (margin, to) = if g.frozen {
        let m = FROZEN_MARGIN_BYTES.min(ahead / 2);
        (m, end + m + CHUNK_BYTES.min(ahead))
    } else {
        (ahead / 2, end + ahead)
    };
    if g.target < end + margin {
        g.target = to;
        return true;
    }
    false
}

impl Drop for Prealloc {
    fn drop(&mut self) {
        self.stop();
    }
}

fn zero_loop(st: &St, file: File) {
    let mut zeroes = AlignedBuf::zeroed(ZERO_BUF_BYTES);
    for line in zeroes.as_mut_slice().chunks_mut(FILL_LINE.len()) {
        line.copy_from_slice(FILL_LINE);
    }
    loop {
        let (from, to) = {
            let mut g = lock(st);
            while !g.stop && g.prepared >= g.target {
                g.urgent = false;
                g = st.cv.wait(g).unwrap_or_else(|e| e.into_inner());
            }
            if g.stop {
                return;
            }
            // Whole filler lines up to a multiple of 64 (after an alignment line if the
            // file's end is not on one).
            let from = g.prepared;
            let line = FILL_LINE.len() as u64;
            let to = (from + CHUNK_BYTES.min(g.target - from) + 66).div_ceil(line) * line;
            (from, to)
        };
        let started = std::time::Instant::now();
        let res = (|| -> std::io::Result<()> {
            let mut pos = from;
            // Filler lines start at multiples of 64, where the writer's writes end.
            let gap = super::format::align_gap(pos);
            if gap > 0 {
                let mut line = Vec::new();
                super::format::encode_align(&mut line, gap);
                file.write_all_at(&line, pos)?;
                pos += gap as u64;
            }
            while pos < to {
                let n = ((to - pos) as usize).min(ZERO_BUF_BYTES);
                file.write_all_at(&zeroes.as_slice()[..n], pos)?;
                pos += n as u64;
            }
            file.sync_data()
        })();
        let mut g = lock(st);
        match res {
            Ok(()) => g.prepared = to,
            Err(e) => {
                crate::warning!(
                    "AOF pre-allocation stopped at {from} bytes: {e}. Appends will grow the file."
                );
                g.failed = true;
                st.cv.notify_all();
                return;
            }
        }
        st.cv.notify_all();
        // Rest (woken early by an urgent request or a stop).
        let rest_until = std::time::Instant::now() + started.elapsed() * REST_PER_BUSY;
        while !g.stop && !g.urgent && g.prepared < g.target {
            let now = std::time::Instant::now();
            if now >= rest_until {
                break;
            }
            g = st
                .cv
                .wait_timeout(g, rest_until - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inner(target: u64) -> Inner {
        Inner {
            target,
            prepared: target,
            failed: false,
            stop: false,
            frozen: false,
            urgent: false,
        }
    }

    /// Normally the target jumps to `ahead` past the log once half of it is used; frozen,
    /// only when the log comes within the margin, and then to the margin plus a chunk.
    #[test]
    fn refill_keeps_ahead_normally_and_only_what_is_needed_when_frozen() {
        let ahead = 64 << 20;
        let mut g = inner(ahead);
        assert!(!refill(&mut g, ahead / 2 - 1, ahead));
        assert!(refill(&mut g, ahead / 2 + 1, ahead));
        assert_eq!(g.target, ahead / 2 + 1 + ahead);
        let mut g = inner(ahead);
        g.frozen = true;
        assert!(!refill(&mut g, ahead / 2 + 1, ahead));
        assert!(!refill(&mut g, ahead - FROZEN_MARGIN_BYTES, ahead));
        let end = ahead - FROZEN_MARGIN_BYTES + 1;
        assert!(refill(&mut g, end, ahead));
        assert_eq!(g.target, end + FROZEN_MARGIN_BYTES + CHUNK_BYTES);
    }

    /// The helper prepares what is asked, resting between chunks, and an append that
    /// needs room now (`ensure`) cuts the rest short: a file frozen mid-way still gets
    /// every byte it needs, written as filler lines.
    #[test]
    fn helper_prepares_on_demand_and_urgency_skips_the_rest() {
        let dir = std::env::temp_dir().join(format!("cairn-prealloc-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f");
        let file = File::create(&path).unwrap();
        let ahead = 8 * CHUNK_BYTES;
        let p = Prealloc::start(file, 0, CHUNK_BYTES, ahead).unwrap();
        p.freeze();
        let t = std::time::Instant::now();
        p.ensure(5 * CHUNK_BYTES);
        assert!(p.prepared() >= 5 * CHUNK_BYTES);
        assert!(t.elapsed() < std::time::Duration::from_secs(10));
        let mut p = p;
        p.stop();
        let bytes = std::fs::read(&path).unwrap();
        assert!(bytes.len() as u64 >= 5 * CHUNK_BYTES);
        assert!(bytes
            .chunks(FILL_LINE.len())
            .skip(1)
            .take(1000)
            .all(|l| l == FILL_LINE));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
