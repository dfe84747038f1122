//! Active expiry: Redis's adaptive sampling cycle. Each call samples keys with a TTL,
//! deletes the expired ones, and repeats while more than the acceptable share of a sample
//! was expired — but never past its time budget, which is checked every few samples.

use super::Keyspace;
use std::time::{Duration, Instant};

/// Keys sampled per loop at effort 1 (Redis's ACTIVE_EXPIRE_CYCLE_KEYS_PER_LOOP).
const KEYS_PER_LOOP: u64 = 20;
/// Percentage of expired keys in a sample under which a db is left alone.
const ACCEPTABLE_STALE_PERCENT: u64 = 10;

/// What one cycle did.
#[derive(Debug, Default, Clone, Copy)]
pub struct ExpireCycle {
    pub sampled: u64,
    pub expired: u64,
    pub time_cap_reached: bool,
}

impl Keyspace {
    /// Runs one active-expire cycle within `budget`. `effort` is Redis's
    /// `active-expire-effort` (1..=10).
    pub fn active_expire_cycle(
        &mut self,
        now_ms: i64,
        budget: Duration,
        effort: u32,
    ) -> ExpireCycle {
        let start = Instant::now();
        let effort = effort.clamp(1, 10) as u64 - 1;
        let per_loop = KEYS_PER_LOOP + KEYS_PER_LOOP / 4 * effort;
        let acceptable = ACCEPTABLE_STALE_PERCENT.saturating_sub(effort);
        let mut out = ExpireCycle::default();
        'dbs: for db in 0..self.num_dbs() {
            loop {
                let volatile = self.volatile_count(db);
                if volatile == 0 {
                    break;
                }
                let n = per_loop.min(volatile);
                let mut expired = 0;
                for _ in 0..n {
                    let Some(e) = self.random_volatile(db) else {
                        break;
                    };
                    out.sampled += 1;
                    if self.is_expired(e, now_ms) {
                        self.delete_and_propagate(db, e, super::events::KeyEventKind::Expired);
                        self.stats.expired_keys += 1;
                        expired += 1;
                    }
                }
                out.expired += expired;
                // Notifications not yet published wait in a bounded record: leave the
                // rest to the next cycle rather than drop events.
                if self.events.is_full() {
                    break 'dbs;
                }
                if start.elapsed() >= budget {
                    out.time_cap_reached = true;
                    self.stats.expired_time_cap_reached_count += 1;
                    break 'dbs;
                }
                if expired * 100 <= n * acceptable {
                    break;
                }
            }
        }
        if out.sampled > 0 {
            let perc = out.expired as f64 / out.sampled as f64;
            self.stats.expired_stale_perc = perc * 0.05 + self.stats.expired_stale_perc * 0.95;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use crate::arena::Arena;
    use crate::keyspace::{StrEnc, Ttl};
    use std::time::Duration;

    #[test]
    fn cycle_removes_expired_and_respects_budget() {
        let mut k = crate::collections::new_keyspace(Arena::new(1 << 30, [1, 1]).unwrap(), 2);
        for i in 0..50_000 {
            let ttl = if i % 2 == 0 {
                Ttl::At(10)
            } else {
                Ttl::At(i64::MAX / 2)
            };
            k.set_string(0, format!("k{i}").as_bytes(), b"v", StrEnc::Embstr, ttl);
        }
        // A zero budget stops after the first sample loop.
        let c = k.active_expire_cycle(1_000, Duration::ZERO, 1);
        assert!(c.time_cap_reached);
        assert!(c.sampled <= 20);
        let mut rounds = 0;
        while k.volatile_count(0) > 25_000 + 2_500 {
            k.active_expire_cycle(1_000, Duration::from_millis(50), 1);
            rounds += 1;
            assert!(rounds < 10_000);
        }
        assert!(k.dbsize(0) < 50_000);
        assert!(k.stats.expired_keys >= 22_500);
    }
}
