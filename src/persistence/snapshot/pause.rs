//! The pause gate: how the snapshot thread stops the executor at a command boundary for the
//! final copy, and lets it go again.
//!
//! The executor is *active* while it runs commands, cron or lazy-free slices, and *idle*
//! while it waits in `poll`/`recv` (it touches no arena memory then). The snapshot thread
//! raises `requested` and waits until the executor is not active; the executor checks the
//! flag at every command boundary and loop iteration (one atomic load on the fast path) and
//! parks until the pause ends; an executor leaving `poll` during a pause parks before
//! touching anything. Both sides use a store-then-load on two SeqCst atomics (Dekker), so at
//! least one of them sees the other's flag; the mutex and condvar only carry the wake-ups.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

#[derive(Default)]
pub struct PauseGate {
    requested: AtomicBool,
    /// The executor may be touching the arena.
    active: AtomicBool,
    lock: Mutex<()>,
    cv: Condvar,
    /// `dirty` and key count the executor published when it last stopped (the cut's).
    dirty_at_park: AtomicU64,
    keys_at_park: AtomicU64,
    /// The replication offset at the last stop (recorded in the image header).
    repl_offset_at_park: AtomicU64,
    /// The executor's replication offset, published as it changes (read at park).
    pub repl_offset: AtomicU64,
    /// The db the replication stream's next command runs in, plus 1 (0: unknown),
    /// published with `repl_offset`, and its value at the last stop.
    pub repl_stream_db: AtomicU64,
    repl_stream_db_at_park: AtomicU64,
    /// The AOF's last LSN, published by the executor when it stops (every entry up to it
    /// was handed to the AOF writer before stopping), and its value at the last stop.
    pub aof_lsn: AtomicU64,
    aof_lsn_at_park: AtomicU64,
}

/// While alive, the executor is stopped between two commands.
pub struct PauseGuard<'a> {
    gate: &'a PauseGate,
    pub started: Instant,
}

impl PauseGate {
    pub fn new() -> PauseGate {
        let g = PauseGate::default();
        g.active.store(true, SeqCst);
        g
    }

    // ---- executor side -------------------------------------------------------------------

    /// A pause is requested (the executor is about to be stopped at its next boundary).
    #[inline]
    pub fn requested(&self) -> bool {
        self.requested.load(SeqCst)
    }

    /// Called between commands: parks if a pause is requested.
    #[inline]
    /// Returns true if the executor was parked (its clock is stale).
    pub fn checkpoint(&self, dirty: u64, keys: impl FnOnce() -> u64) -> bool {
        if self.requested.load(SeqCst) {
            self.park(dirty, keys());
            return true;
        }
        false
    }

    #[cold]
    fn park(&self, dirty: u64, keys: u64) {
        self.dirty_at_park.store(dirty, SeqCst);
        self.keys_at_park.store(keys, SeqCst);
        self.repl_offset_at_park
            .store(self.repl_offset.load(SeqCst), SeqCst);
        self.repl_stream_db_at_park
            .store(self.repl_stream_db.load(SeqCst), SeqCst);
        self.aof_lsn_at_park
            .store(self.aof_lsn.load(SeqCst), SeqCst);
        let mut g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        self.active.store(false, SeqCst);
        self.cv.notify_all();
        while self.requested.load(SeqCst) {
            g = self.cv.wait(g).unwrap_or_else(|e| e.into_inner());
        }
        self.active.store(true, SeqCst);
    }

    /// The executor is about to block in poll/recv and will not touch the arena.
    pub fn idle_begin(&self, dirty: u64, keys: impl FnOnce() -> u64) {
        self.dirty_at_park.store(dirty, SeqCst);
        self.keys_at_park.store(keys(), SeqCst);
        self.repl_offset_at_park
            .store(self.repl_offset.load(SeqCst), SeqCst);
        self.repl_stream_db_at_park
            .store(self.repl_stream_db.load(SeqCst), SeqCst);
        self.aof_lsn_at_park
            .store(self.aof_lsn.load(SeqCst), SeqCst);
        self.active.store(false, SeqCst);
        if self.requested.load(SeqCst) {
            let _g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
            self.cv.notify_all();
        }
    }

    /// The executor is back from poll/recv: waits out a pause in progress.
    pub fn idle_end(&self, dirty: u64, keys: impl FnOnce() -> u64) {
        self.active.store(true, SeqCst);
        if self.requested.load(SeqCst) {
            self.park(dirty, keys());
        }
    }

    // ---- snapshot side -------------------------------------------------------------------

    /// Stops the executor at its next command boundary. None when `cancel` is raised while
    /// waiting (the executor is shutting down and will never reach a boundary).
    pub fn pause(&self, cancel: &AtomicBool) -> Option<PauseGuard<'_>> {
        self.requested.store(true, SeqCst);
        let mut g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        while self.active.load(SeqCst) {
            if cancel.load(SeqCst) {
                self.requested.store(false, SeqCst);
                self.cv.notify_all();
                return None;
            }
            g = self
                .cv
                .wait_timeout(g, Duration::from_millis(5))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        drop(g);
        Some(PauseGuard {
            gate: self,
            started: Instant::now(),
        })
    }

    /// The `dirty` counter at the last stop (read during a pause: the cut's value).
    pub fn dirty_at_park(&self) -> u64 {
        self.dirty_at_park.load(SeqCst)
    }
    pub fn keys_at_park(&self) -> u64 {
        self.keys_at_park.load(SeqCst)
    }
    pub fn repl_offset_at_park(&self) -> u64 {
        self.repl_offset_at_park.load(SeqCst)
    }
    /// The stream db at the last stop, plus 1 (0: unknown).
    pub fn repl_stream_db_at_park(&self) -> u32 {
        self.repl_stream_db_at_park
            .load(SeqCst)
            .min(u32::MAX as u64) as u32
    }
    pub fn aof_lsn_at_park(&self) -> u64 {
        self.aof_lsn_at_park.load(SeqCst)
    }
}

impl Drop for PauseGuard<'_> {
    fn drop(&mut self) {
        let _g = self.gate.lock.lock().unwrap_or_else(|e| e.into_inner());
        self.gate.requested.store(false, SeqCst);
        self.gate.cv.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn executor_stops_between_steps_and_resumes() {
        let gate = Arc::new(PauseGate::new());
        let counter = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (g2, c2, s2) = (gate.clone(), counter.clone(), stop.clone());
        let exec = std::thread::spawn(move || {
            let mut i = 0u64;
            while !s2.load(SeqCst) {
                g2.checkpoint(i, || 0);
                c2.fetch_add(1, SeqCst);
                i += 1;
                if i.is_multiple_of(1000) {
                    g2.idle_begin(i, || 0);
                    std::thread::sleep(Duration::from_micros(200));
                    g2.idle_end(i, || 0);
                }
            }
        });
        let never = AtomicBool::new(false);
        for _ in 0..50 {
            let guard = gate.pause(&never).unwrap();
            let a = counter.load(SeqCst);
            std::thread::sleep(Duration::from_millis(2));
            assert_eq!(counter.load(SeqCst), a, "executor ran during the pause");
            drop(guard);
            std::thread::sleep(Duration::from_millis(1));
        }
        stop.store(true, SeqCst);
        exec.join().unwrap();
    }
}
