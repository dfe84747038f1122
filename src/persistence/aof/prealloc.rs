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

/// Bytes zeroed (then synced) per step.
const CHUNK_BYTES: u64 = 8 << 20;
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
    /// Starts the helper on `file` (its own handle), whose first `prepared` bytes exist.
    pub fn start(file: File, prepared: u64, write_pos: u64, ahead: u64) -> std::io::Result<Self> {
        let st = Arc::new(St {
            m: Mutex::new(Inner {
                target: write_pos + ahead,
                prepared,
                failed: false,
                stop: false,
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
        if g.target < end + self.ahead / 2 {
            g.target = end + self.ahead;
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
        if g.target < end + self.ahead / 2 && !g.stop {
            g.target = end + self.ahead;
            self.st.cv.notify_all();
        }
        !g.stop && (g.prepared >= end || g.failed)
    }
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
    }
}
