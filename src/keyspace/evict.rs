//! `maxmemory` eviction: Redis's sampled approximations of LRU, LFU and TTL order, with a
//! pool of the best candidates kept between calls so that each eviction compares more than
//! one sample's worth of keys.

use super::{lru_clock, Keyspace, LRU_CLOCK_MAX};

pub use crate::config::EvictionPolicy;

/// Candidates kept between evictions (Redis's EVPOOL_SIZE).
pub const EVICTION_POOL_SIZE: usize = 16;

#[derive(Default)]
pub struct EvictionPool {
    /// (score: higher evicts first, db, key)
    candidates: Vec<(u64, usize, Vec<u8>)>,
    next_db: usize,
}

impl EvictionPool {
    fn offer(&mut self, score: u64, db: usize, key: &[u8]) {
        if self.candidates.iter().any(|(_, d, k)| *d == db && k == key) {
            return;
        }
        if self.candidates.len() < EVICTION_POOL_SIZE {
            self.candidates.push((score, db, key.to_vec()));
        } else {
            let (worst, _) = self
                .candidates
                .iter()
                .enumerate()
                .min_by_key(|(_, c)| c.0)
                .map(|(i, c)| (i, c.0))
                .expect("pool is full");
            if self.candidates[worst].0 < score {
                self.candidates[worst] = (score, db, key.to_vec());
            }
        }
    }
}

/// Idle time in ms of an entry under the LRU clock (Redis's estimateObjectIdleTime).
pub fn idle_ms(lru: u32) -> u64 {
    let now = lru_clock();
    let ticks = if now >= lru {
        now - lru
    } else {
        LRU_CLOCK_MAX - lru + now
    };
    ticks as u64 * 1000
}

impl Keyspace {
    /// Evicts one key according to `policy`. Returns false when nothing can be evicted.
    pub fn evict_one(
        &mut self,
        policy: EvictionPolicy,
        samples: usize,
        pool: &mut EvictionPool,
        now_ms: i64,
    ) -> bool {
        if policy == EvictionPolicy::NoEviction {
            return false;
        }
        let dbs = self.num_dbs();
        let count = |ks: &Keyspace, db: usize| {
            if policy.volatile_only() {
                ks.volatile_count(db)
            } else {
                ks.dbsize(db)
            }
        };
        if matches!(
            policy,
            EvictionPolicy::AllKeysRandom | EvictionPolicy::VolatileRandom
        ) {
            for i in 0..dbs {
                let db = (pool.next_db + i) % dbs;
                if count(self, db) == 0 {
                    continue;
                }
                pool.next_db = db + 1;
                let e = if policy.volatile_only() {
                    self.random_volatile(db)
                } else {
                    self.random_entry(db)
                };
                if let Some(e) = e {
                    self.delete_and_propagate(db, e, super::events::KeyEventKind::Evicted);
                    self.stats.evicted_keys += 1;
                    return true;
                }
            }
            return false;
        }
        for _attempt in 0..4 {
            for db in 0..dbs {
                if count(self, db) == 0 {
                    continue;
                }
                for _ in 0..samples.max(1) {
                    let e = if policy.volatile_only() {
                        self.random_volatile(db)
                    } else {
                        self.random_entry(db)
                    };
                    let Some(e) = e else { break };
                    let score = match policy {
                        EvictionPolicy::AllKeysLru | EvictionPolicy::VolatileLru => {
                            idle_ms(self.lru(e))
                        }
                        EvictionPolicy::AllKeysLfu | EvictionPolicy::VolatileLfu => {
                            255 - self.lfu_decr_and_return(e) as u64
                        }
                        EvictionPolicy::VolatileTtl => {
                            u64::MAX - self.expire_at(e).unwrap_or(i64::MAX) as u64
                        }
                        _ => 0,
                    };
                    let key = self.key(e).to_vec();
                    pool.offer(score, db, &key);
                }
            }
            // Pop the best candidate that still exists.
            while !pool.candidates.is_empty() {
                let best = pool
                    .candidates
                    .iter()
                    .enumerate()
                    .max_by_key(|(_, c)| c.0)
                    .map(|(i, _)| i)
                    .expect("non-empty");
                let (_, db, key) = pool.candidates.swap_remove(best);
                if let Some(e) = self.find_raw(db, &key) {
                    if policy.volatile_only() && !self.has_expire(e) {
                        continue;
                    }
                    let _ = now_ms;
                    self.delete_and_propagate(db, e, super::events::KeyEventKind::Evicted);
                    self.stats.evicted_keys += 1;
                    return true;
                }
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arena::Arena;
    use crate::keyspace::{StrEnc, Ttl};

    #[test]
    fn volatile_policies_only_evict_keys_with_ttl() {
        let mut k = crate::collections::new_keyspace(Arena::new(1 << 30, [2, 2]).unwrap(), 2);
        for i in 0..100 {
            k.set_string(
                0,
                format!("p{i}").as_bytes(),
                b"v",
                StrEnc::Embstr,
                Ttl::Clear,
            );
            k.set_string(
                1,
                format!("t{i}").as_bytes(),
                b"v",
                StrEnc::Embstr,
                Ttl::At(1_000_000 + i),
            );
        }
        let mut pool = EvictionPool::default();
        for policy in [
            EvictionPolicy::VolatileTtl,
            EvictionPolicy::VolatileRandom,
            EvictionPolicy::VolatileLru,
        ] {
            for _ in 0..30 {
                assert!(k.evict_one(policy, 5, &mut pool, 0));
            }
        }
        assert_eq!(k.dbsize(0), 100);
        assert_eq!(k.dbsize(1), 10);
        while k.evict_one(EvictionPolicy::VolatileTtl, 5, &mut pool, 0) {}
        assert_eq!(k.dbsize(1), 0);
        assert!(!k.evict_one(EvictionPolicy::VolatileLru, 5, &mut pool, 0));
        assert!(k.evict_one(EvictionPolicy::AllKeysLru, 5, &mut pool, 0));
        assert!(!k.evict_one(EvictionPolicy::NoEviction, 5, &mut pool, 0));
    }

    #[test]
    fn volatile_ttl_prefers_soonest_expiry() {
        let mut k = crate::collections::new_keyspace(Arena::new(1 << 30, [2, 2]).unwrap(), 1);
        for i in 0..10 {
            k.set_string(
                0,
                format!("t{i}").as_bytes(),
                b"v",
                StrEnc::Embstr,
                Ttl::At(1_000 + i),
            );
        }
        let mut pool = EvictionPool::default();
        // Sampling picks keys at random: with 500 samples over 10 keys the soonest one is
        // left out of the pool with probability 0.9^500 < 1e-22 (with 50 samples, 0.5 %:
        // a CI run failed on it).
        assert!(k.evict_one(EvictionPolicy::VolatileTtl, 500, &mut pool, 0));
        assert!(k.find_raw(0, b"t0").is_none());
    }
}
