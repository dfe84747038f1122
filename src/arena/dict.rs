//! A chained hash table in the arena with incremental rehashing (Redis's `dict` design).
//!
//! Why our own table and not hashbrown: growing a table must never rehash the whole
//! dataset in one go on the executor (8M keys would stall it for hundreds of ms), and every
//! link must be an arena [`Ref`] so the snapshot engine can copy the table as raw pages.
//! Two tables exist while rehashing; each write moves a few buckets, and the server's cron
//! moves more under a time budget.
//!
//! Entries are arena blocks laid out as `[next: u32][key_len: u32] ... key at key_off`;
//! the rest of the entry belongs to the owner.

use super::validate::{Claims, Corrupt};
use super::{Arena, Pod, Ref, NULL};

/// A read prefetch hint (no-op off x86_64).
#[inline(always)]
pub fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetch never faults, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch(p as *const i8, std::arch::x86_64::_MM_HINT_T0)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

pub const INITIAL_SIZE_LOG2: u32 = 2;
/// Buckets visited (empty ones) per rehash step before giving up, as Redis.
const EMPTY_VISITS_PER_STEP: usize = 10;

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DictHeader {
    /// Bucket arrays (`1 << size_log2` refs each); `table[1]` only while rehashing.
    pub table: [Ref; 2],
    pub size_log2: [u32; 2],
    pub used: [u64; 2],
    /// Next bucket of `table[0]` to move, or -1 when not rehashing.
    pub rehash_idx: i64,
    /// Where an entry's key bytes start.
    pub key_off: u32,
    pub _pad: u32,
}
unsafe impl Pod for DictHeader {}

#[inline]
pub fn entry_next(a: &Arena, e: Ref) -> Ref {
    a.read_u32(e, 0)
}
#[inline]
pub fn set_entry_next(a: &mut Arena, e: Ref, next: Ref) {
    a.write_u32(e, 0, next)
}
#[inline]
pub fn entry_key_len(a: &Arena, e: Ref) -> usize {
    a.read_u32(e, 4) as usize
}

impl DictHeader {
    pub fn new(key_off: u32) -> DictHeader {
        DictHeader {
            table: [NULL; 2],
            size_log2: [0; 2],
            used: [0; 2],
            rehash_idx: -1,
            key_off,
            _pad: 0,
        }
    }

    #[inline]
    pub fn len(&self) -> u64 {
        self.used[0] + self.used[1]
    }
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    #[inline]
    pub fn is_rehashing(&self) -> bool {
        self.rehash_idx >= 0
    }
    #[inline]
    fn size(&self, t: usize) -> u64 {
        if self.table[t] == NULL {
            0
        } else {
            1u64 << self.size_log2[t]
        }
    }
    /// Total buckets (both tables).
    pub fn buckets(&self) -> u64 {
        self.size(0) + self.size(1)
    }
    #[inline]
    fn mask(&self, t: usize) -> u64 {
        self.size(t).wrapping_sub(1)
    }
    #[inline]
    fn bucket(&self, a: &Arena, t: usize, idx: u64) -> Ref {
        a.read_u32(self.table[t], idx as usize * 4)
    }
    #[inline]
    fn set_bucket(&self, a: &mut Arena, t: usize, idx: u64, e: Ref) {
        a.write_u32(self.table[t], idx as usize * 4, e)
    }
    #[inline]
    pub fn key<'a>(&self, a: &'a Arena, e: Ref) -> &'a [u8] {
        a.bytes(e, self.key_off as usize, entry_key_len(a, e))
    }

    /// Bytes the bucket arrays take (for MEMORY and INFO).
    pub fn table_bytes(&self) -> u64 {
        self.buckets() * 4
    }

    pub fn find(&self, a: &Arena, key: &[u8], hash: u64) -> Option<Ref> {
        if self.is_empty() {
            return None;
        }
        for t in 0..2 {
            if self.table[t] == NULL {
                break;
            }
            let idx = hash & self.mask(t);
            if t == 0 && self.is_rehashing() && (idx as i64) < self.rehash_idx {
                continue; // already moved to table 1
            }
            let mut e = self.bucket(a, t, idx);
            while e != NULL {
                if entry_key_len(a, e) == key.len() && self.key(a, e) == key {
                    return Some(e);
                }
                e = entry_next(a, e);
            }
            if !self.is_rehashing() {
                break;
            }
        }
        None
    }

    /// Hints the CPU to load the bucket slot(s) for `hash` (first stage of a batched
    /// lookup: many independent cache misses overlap instead of queueing).
    #[inline]
    pub fn prefetch_bucket(&self, a: &Arena, hash: u64) {
        for t in 0..2 {
            if self.table[t] == NULL {
                break;
            }
            let idx = hash & self.mask(t);
            // SAFETY: the slot lies inside the bucket array (idx <= mask).
            prefetch(unsafe { a.ptr(self.table[t]).add(idx as usize * 4) });
        }
    }

    /// Second stage: the bucket slot is (likely) cached; hint the chain's first entry.
    #[inline]
    pub fn prefetch_entry(&self, a: &Arena, hash: u64) {
        for t in 0..2 {
            if self.table[t] == NULL {
                break;
            }
            let e = self.bucket(a, t, hash & self.mask(t));
            if e != NULL {
                prefetch(a.ptr(e));
            }
        }
    }

    /// Links a new entry whose key is known to be absent.
    pub fn insert_new(&mut self, a: &mut Arena, e: Ref, hash: u64) {
        self.rehash_step(a, 1);
        self.expand_if_needed(a);
        let t = if self.is_rehashing() { 1 } else { 0 };
        let idx = hash & self.mask(t);
        let head = self.bucket(a, t, idx);
        set_entry_next(a, e, head);
        self.set_bucket(a, t, idx, e);
        self.used[t] += 1;
    }

    /// Finds the link that points at `target` (a bucket slot or a previous entry's next).
    fn find_link(&self, a: &Arena, target: Ref, hash: u64) -> Option<(usize, u64, Ref)> {
        for t in 0..2 {
            if self.table[t] == NULL {
                break;
            }
            let idx = hash & self.mask(t);
            if t == 0 && self.is_rehashing() && (idx as i64) < self.rehash_idx {
                continue;
            }
            let mut prev = NULL;
            let mut e = self.bucket(a, t, idx);
            while e != NULL {
                if e == target {
                    return Some((t, idx, prev));
                }
                prev = e;
                e = entry_next(a, e);
            }
        }
        None
    }

    /// Replaces entry `old` by `new` (same key, so same hash) in the chain.
    pub fn replace(&mut self, a: &mut Arena, old: Ref, new: Ref, hash: u64) {
        let (t, idx, prev) = self
            .find_link(a, old, hash)
            .expect("dict replace: entry not linked");
        let next = entry_next(a, old);
        set_entry_next(a, new, next);
        if prev == NULL {
            self.set_bucket(a, t, idx, new);
        } else {
            set_entry_next(a, prev, new);
        }
    }

    /// Unlinks entry `e`; the caller frees it.
    pub fn unlink(&mut self, a: &mut Arena, e: Ref, hash: u64) {
        let (t, idx, prev) = self
            .find_link(a, e, hash)
            .expect("dict unlink: entry not linked");
        let next = entry_next(a, e);
        if prev == NULL {
            self.set_bucket(a, t, idx, next);
        } else {
            set_entry_next(a, prev, next);
        }
        self.used[t] -= 1;
        self.rehash_step(a, 1);
    }

    fn expand_if_needed(&mut self, a: &mut Arena) {
        if self.is_rehashing() {
            return;
        }
        if self.table[0] == NULL {
            self.table[0] = a.alloc_zeroed(4 << INITIAL_SIZE_LOG2);
            self.size_log2[0] = INITIAL_SIZE_LOG2;
            return;
        }
        if self.used[0] >= self.size(0) {
            self.start_resize(a, self.used[0] + 1);
        }
    }

    /// Starts moving to a table sized for `want` entries (next power of two).
    fn start_resize(&mut self, a: &mut Arena, want: u64) {
        debug_assert!(!self.is_rehashing());
        let log2 = want
            .max(1 << INITIAL_SIZE_LOG2)
            .next_power_of_two()
            .trailing_zeros();
        if log2 == self.size_log2[0] {
            return;
        }
        // The next table is the one allocation a dict makes whose size grows with the
        // keyspace: when the arena cannot give it, the dict keeps its table (chains get
        // longer) rather than failing the write that asked for room.
        let Ok(table) = a.try_alloc_zeroed_optional(4usize << log2) else {
            return;
        };
        self.table[1] = table;
        self.size_log2[1] = log2;
        self.used[1] = 0;
        self.rehash_idx = 0;
    }

    /// Shrinks a sparse table (fill under 10 %), as Redis's cron does.
    pub fn shrink_if_sparse(&mut self, a: &mut Arena) {
        if self.is_rehashing() || self.table[0] == NULL {
            return;
        }
        let size = self.size(0);
        if size > (1 << INITIAL_SIZE_LOG2) && self.used[0] * 100 / size < 10 {
            self.start_resize(a, self.used[0]);
        }
    }

    /// Moves up to `n` buckets from table 0 to table 1. Returns true while more remain.
    pub fn rehash_step(&mut self, a: &mut Arena, n: usize) -> bool {
        if !self.is_rehashing() {
            return false;
        }
        let mut empty_visits = n * EMPTY_VISITS_PER_STEP;
        let mut n = n;
        let mask1 = self.mask(1);
        while n > 0 && self.used[0] != 0 {
            n -= 1;
            let mut idx = self.rehash_idx as u64;
            debug_assert!(idx < self.size(0));
            while self.bucket(a, 0, idx) == NULL {
                idx += 1;
                self.rehash_idx += 1;
                empty_visits -= 1;
                if empty_visits == 0 {
                    return true;
                }
            }
            let mut e = self.bucket(a, 0, idx);
            while e != NULL {
                let next = entry_next(a, e);
                let h = a.hash(self.key(a, e));
                let dst = h & mask1;
                let head = self.bucket(a, 1, dst);
                set_entry_next(a, e, head);
                self.set_bucket(a, 1, dst, e);
                self.used[0] -= 1;
                self.used[1] += 1;
                e = next;
            }
            self.set_bucket(a, 0, idx, NULL);
            self.rehash_idx += 1;
        }
        if self.used[0] == 0 {
            a.free(self.table[0], 4usize << self.size_log2[0]);
            self.table[0] = self.table[1];
            self.size_log2[0] = self.size_log2[1];
            self.used[0] = self.used[1];
            self.table[1] = NULL;
            self.size_log2[1] = 0;
            self.used[1] = 0;
            self.rehash_idx = -1;
            return false;
        }
        true
    }

    /// Redis's reverse-binary cursor scan: every entry present for the whole scan is
    /// reported at least once, even across resizes. Returns the next cursor (0 = done).
    pub fn scan(&self, a: &Arena, cursor: u64, mut f: impl FnMut(Ref)) -> u64 {
        if self.is_empty() {
            return 0;
        }
        let mut v = cursor;
        let emit = |t: usize, idx: u64, f: &mut dyn FnMut(Ref)| {
            let mut e = self.bucket(a, t, idx);
            while e != NULL {
                let next = entry_next(a, e);
                f(e);
                e = next;
            }
        };
        if !self.is_rehashing() {
            let m0 = self.mask(0);
            emit(0, v & m0, &mut f);
            v |= !m0;
            v = v.reverse_bits().wrapping_add(1).reverse_bits();
        } else {
            let (t0, t1) = if self.size(0) > self.size(1) {
                (1, 0)
            } else {
                (0, 1)
            };
            let (m0, m1) = (self.mask(t0), self.mask(t1));
            emit(t0, v & m0, &mut f);
            loop {
                emit(t1, v & m1, &mut f);
                v |= !m1;
                v = v.reverse_bits().wrapping_add(1).reverse_bits();
                if v & (m0 ^ m1) == 0 {
                    break;
                }
            }
        }
        v
    }

    /// A random entry (uniform over buckets, then over the chain), or None when empty.
    pub fn random(&self, a: &Arena, rng: &mut crate::util::Rng) -> Option<Ref> {
        let head = self.random_head(a, rng)?;
        let mut len = 0u64;
        let mut e = head;
        while e != NULL {
            len += 1;
            e = entry_next(a, e);
        }
        let mut pick = rng.below(len);
        e = head;
        while pick > 0 {
            e = entry_next(a, e);
            pick -= 1;
        }
        Some(e)
    }

    /// A random entry, uniform over entries rather than over buckets (SPOP and
    /// SRANDMEMBER, where Redis uses dictGetFairRandomKey): a random bucket's chain of
    /// length L yields its entry number j for a random j below `FAIR_CHAIN`, and nothing
    /// when j >= L, so every entry in a chain of at most FAIR_CHAIN entries is equally
    /// likely. Bounded tries (a sparse table rejects more), then the bucket-first pick.
    pub fn random_fair(&self, a: &Arena, rng: &mut crate::util::Rng) -> Option<Ref> {
        const FAIR_CHAIN: u64 = 4;
        const TRIES: usize = 64;
        for _ in 0..TRIES {
            let head = self.random_head(a, rng)?;
            let mut len = 0u64;
            let mut e = head;
            while e != NULL {
                len += 1;
                e = entry_next(a, e);
            }
            // A chain longer than FAIR_CHAIN (rare) is sampled over its own length, so
            // its entries stay reachable.
            let mut j = rng.below(FAIR_CHAIN.max(len));
            if j >= len {
                continue;
            }
            e = head;
            while j > 0 {
                e = entry_next(a, e);
                j -= 1;
            }
            return Some(e);
        }
        self.random(a, rng)
    }

    /// The head of a uniformly chosen non-empty bucket.
    fn random_head(&self, a: &Arena, rng: &mut crate::util::Rng) -> Option<Ref> {
        if self.is_empty() {
            return None;
        }
        let mut head;
        loop {
            if self.is_rehashing() {
                let s0 = self.size(0);
                let span = s0 + self.size(1) - self.rehash_idx as u64;
                let i = self.rehash_idx as u64 + rng.below(span);
                head = if i >= s0 {
                    self.bucket(a, 1, i - s0)
                } else {
                    self.bucket(a, 0, i)
                };
            } else {
                head = self.bucket(a, 0, rng.below(self.size(0)));
            }
            if head != NULL {
                break;
            }
        }
        Some(head)
    }

    /// Frees the table and, through `free_entry`, its entries, at most `budget` entries per
    /// call. Used for flushes done in slices off the hot path. Returns true when finished.
    pub fn destroy_some(
        &mut self,
        a: &mut Arena,
        mut budget: usize,
        mut free_entry: impl FnMut(&mut Arena, Ref),
    ) -> bool {
        // `rehash_idx` doubles as the destroy cursor over table 0 once a dict is detached.
        for t in 0..2 {
            if self.table[t] == NULL {
                continue;
            }
            let size = self.size(t);
            let mut idx = if t == 0 {
                self.rehash_idx.max(0) as u64
            } else {
                0
            };
            while idx < size {
                let mut e = self.bucket(a, t, idx);
                while e != NULL && budget > 0 {
                    let next = entry_next(a, e);
                    free_entry(a, e);
                    self.used[t] -= 1;
                    budget -= 1;
                    e = next;
                }
                self.set_bucket(a, t, idx, e);
                if e != NULL {
                    if t == 0 {
                        self.rehash_idx = idx as i64;
                    }
                    return false;
                }
                idx += 1;
                if budget == 0 && idx < size {
                    if t == 0 {
                        self.rehash_idx = idx as i64;
                    } else {
                        // Table 1 is walked from 0 again next time; its early buckets are empty.
                    }
                    return false;
                }
            }
            a.free(self.table[t], 4usize << self.size_log2[t]);
            self.table[t] = NULL;
            if t == 0 {
                self.rehash_idx = -1;
            }
        }
        *self = DictHeader::new(self.key_off);
        true
    }
}

/// Buckets the image validation looks ahead to prefetch entries.
const PREFETCH_AHEAD: u64 = 16;

/// How a dict found in a snapshot image is checked (see [`DictHeader::validate`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DictUse {
    /// Looked up, written and rehashed: every entry must sit in the bucket its key
    /// hashes to (unlink and replace find entries by hash).
    Live,
    /// Detached and being freed in slices (a graveyard): only freed, so only its memory
    /// is checked; its tables may be half destroyed.
    Detached,
}

impl DictUse {
    /// `Live` for a dict the keyspace reaches, `Detached` for one in a graveyard.
    pub fn of(live: bool) -> DictUse {
        if live {
            DictUse::Live
        } else {
            DictUse::Detached
        }
    }
}

impl DictHeader {
    /// Checks a dict restored from an image before anything walks it: the header's
    /// tables and sizes, both bucket arrays inside the arena, every chain acyclic and
    /// holding exactly `used` entries, no entry left below the rehash cursor, and (when
    /// live) every entry in the bucket its key hashes to. `entry` claims and checks one
    /// entry (at least its first 8 bytes and its key at `key_off`); `at` is where the
    /// header lies, for the error.
    pub fn validate(
        &self,
        a: &Arena,
        claims: &mut Claims,
        key_off: u32,
        usage: DictUse,
        at: u64,
        mut entry: impl FnMut(&Arena, &mut Claims, Ref) -> Result<(), Corrupt>,
    ) -> Result<(), Corrupt> {
        let bad = |what: String| Err(Corrupt::new(what, at));
        if self.key_off != key_off {
            return bad(format!(
                "dict key offset {} (expected {key_off})",
                self.key_off
            ));
        }
        if self.rehash_idx < -1 {
            return bad(format!("dict rehash index {}", self.rehash_idx));
        }
        for t in 0..2 {
            if self.table[t] != NULL && self.size_log2[t] > 32 {
                return bad(format!("dict table {t} of 2^{} buckets", self.size_log2[t]));
            }
        }
        if self.rehash_idx >= 0 && (self.table[0] == NULL || self.rehash_idx as u64 > self.size(0))
        {
            return bad(format!(
                "dict rehash index {} outside table 0 ({} buckets)",
                self.rehash_idx,
                self.size(0)
            ));
        }
        if usage == DictUse::Live {
            if self.is_rehashing() != (self.table[1] != NULL) {
                return bad("dict with a second table but no rehash (or the reverse)".into());
            }
            if self.table[0] == NULL && self.table[1] != NULL {
                return bad("dict with a second table and no first".into());
            }
        }
        for t in 0..2 {
            if self.table[t] == NULL {
                if self.used[t] != 0 {
                    return bad(format!(
                        "dict table {t} is absent but holds {}",
                        self.used[t]
                    ));
                }
                continue;
            }
            claims.claim(self.table[t], 4 << self.size_log2[t], "dict bucket array")?;
            let mut found = 0u64;
            let size = self.size(t);
            for idx in 0..size {
                // The entries are scattered over the arena: start loading the entry a few
                // buckets ahead so the misses overlap (the walk is otherwise one miss
                // after another).
                if idx + PREFETCH_AHEAD < size {
                    let ahead = self.bucket(a, t, idx + PREFETCH_AHEAD);
                    if ahead != NULL && claims.peek(ahead, 8, "").is_ok() {
                        prefetch(a.ptr(ahead));
                    }
                }
                let mut e = self.bucket(a, t, idx);
                if e != NULL && t == 0 && (idx as i64) < self.rehash_idx {
                    return bad(format!(
                        "dict bucket {idx} below the rehash index {} holds entries",
                        self.rehash_idx
                    ));
                }
                while e != NULL {
                    found += 1;
                    if found > self.used[t] {
                        return bad(format!(
                            "dict table {t} holds more entries than its count ({})",
                            self.used[t]
                        ));
                    }
                    entry(a, claims, e)?;
                    if usage == DictUse::Live {
                        let h = a.hash(self.key(a, e));
                        if h & self.mask(t) != idx {
                            return Err(Corrupt::at(
                                format!("dict entry in bucket {idx} of table {t}, not its key's"),
                                e,
                            ));
                        }
                    }
                    e = entry_next(a, e);
                }
            }
            if found != self.used[t] {
                return bad(format!(
                    "dict table {t} counts {} entries but holds {found}",
                    self.used[t]
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::Rng;
    use std::collections::HashSet;

    const KEY_OFF: u32 = 8;

    fn make_entry(a: &mut Arena, key: &[u8]) -> Ref {
        let e = a.alloc(8 + key.len());
        a.write_u32(e, 0, NULL);
        a.write_u32(e, 4, key.len() as u32);
        a.bytes_mut(e, 8, key.len()).copy_from_slice(key);
        e
    }

    #[test]
    fn a_dict_keeps_its_table_when_the_arena_cannot_grow_it() {
        let mut a = Arena::new(1 << 20, [3, 4]).unwrap();
        a.set_optional_floor(64 * 1024);
        let mut d = DictHeader::new(KEY_OFF);
        // Insert until the arena is nearly full: growing the bucket table fails quietly
        // past some size and inserts go on into longer chains.
        let mut n = 0u64;
        while a.headroom_bytes() > 32 * 1024 {
            let key = n.to_le_bytes();
            let e = make_entry(&mut a, &key);
            let h = a.hash(&key);
            d.insert_new(&mut a, e, h);
            n += 1;
        }
        assert!(
            d.len() > d.buckets(),
            "{} keys in {} buckets",
            d.len(),
            d.buckets()
        );
        assert!(
            d.buckets() * 4 <= 512 * 1024,
            "a table of {} buckets",
            d.buckets()
        );
        for i in 0..n {
            let key = i.to_le_bytes();
            assert!(d.find(&a, &key, a.hash(&key)).is_some(), "key {i} lost");
        }
    }

    #[test]
    fn insert_find_remove_through_rehash() {
        let mut a = Arena::new(512 << 20, [3, 4]).unwrap();
        let mut d = DictHeader::new(KEY_OFF);
        let n = 50_000u32;
        for i in 0..n {
            let k = format!("key:{i}");
            let h = a.hash(k.as_bytes());
            assert!(d.find(&a, k.as_bytes(), h).is_none());
            let e = make_entry(&mut a, k.as_bytes());
            d.insert_new(&mut a, e, h);
        }
        assert_eq!(d.len(), n as u64);
        for i in 0..n {
            let k = format!("key:{i}");
            let h = a.hash(k.as_bytes());
            assert!(d.find(&a, k.as_bytes(), h).is_some(), "lost {k}");
        }
        for i in (0..n).step_by(2) {
            let k = format!("key:{i}");
            let h = a.hash(k.as_bytes());
            let e = d.find(&a, k.as_bytes(), h).unwrap();
            d.unlink(&mut a, e, h);
            a.free(e, 8 + k.len());
        }
        assert_eq!(d.len(), n as u64 / 2);
        while d.rehash_step(&mut a, 100) {}
        d.shrink_if_sparse(&mut a);
        for i in 0..n {
            let k = format!("key:{i}");
            let h = a.hash(k.as_bytes());
            assert_eq!(d.find(&a, k.as_bytes(), h).is_some(), i % 2 == 1);
        }
    }

    #[test]
    fn scan_reports_every_entry_across_a_resize() {
        let mut a = Arena::new(512 << 20, [5, 6]).unwrap();
        let mut d = DictHeader::new(KEY_OFF);
        for i in 0..1000 {
            let k = format!("k{i}");
            let h = a.hash(k.as_bytes());
            let e = make_entry(&mut a, k.as_bytes());
            d.insert_new(&mut a, e, h);
        }
        let mut seen = HashSet::new();
        let mut cursor = 0;
        let mut rounds = 0;
        loop {
            cursor = d.scan(&a, cursor, |e| {
                seen.insert(d.key(&a, e).to_vec());
            });
            rounds += 1;
            if rounds == 5 {
                // Grow mid-scan: the guarantee must still hold.
                for i in 1000..3000 {
                    let k = format!("k{i}");
                    let h = a.hash(k.as_bytes());
                    let e = make_entry(&mut a, k.as_bytes());
                    d.insert_new(&mut a, e, h);
                }
            }
            if cursor == 0 {
                break;
            }
        }
        for i in 0..1000 {
            assert!(
                seen.contains(format!("k{i}").as_bytes()),
                "scan missed k{i}"
            );
        }
    }

    #[test]
    fn random_and_destroy() {
        let mut a = Arena::new(512 << 20, [7, 8]).unwrap();
        let before = a.used_bytes();
        let mut d = DictHeader::new(KEY_OFF);
        let mut rng = Rng::new(42);
        assert!(d.random(&a, &mut rng).is_none());
        for i in 0..10_000 {
            let k = format!("r{i}");
            let h = a.hash(k.as_bytes());
            let e = make_entry(&mut a, k.as_bytes());
            d.insert_new(&mut a, e, h);
        }
        let mut distinct = HashSet::new();
        for _ in 0..1000 {
            distinct.insert(d.random(&a, &mut rng).unwrap());
        }
        assert!(distinct.len() > 900);
        let mut calls = 0;
        while !d.destroy_some(&mut a, 100, |a, e| {
            let len = entry_key_len(a, e);
            a.free(e, 8 + len);
        }) {
            calls += 1;
        }
        assert!(calls >= 99);
        assert_eq!(a.used_bytes(), before);
    }
}

#[cfg(test)]
mod chain_tests {
    use super::*;

    #[test]
    fn chains_stay_short_for_benchmark_keys() {
        let mut a = Arena::new(1 << 30, [123, 456]).unwrap();
        let mut d = DictHeader::new(8);
        let mut rng = crate::util::Rng::new(1);
        for _ in 0..300_000 {
            let k = format!("key:{:012}", rng.below(1_000_000));
            let h = a.hash(k.as_bytes());
            if d.find(&a, k.as_bytes(), h).is_none() {
                let e = a.alloc(8 + k.len());
                a.write_u32(e, 0, NULL);
                a.write_u32(e, 4, k.len() as u32);
                a.bytes_mut(e, 8, k.len()).copy_from_slice(k.as_bytes());
                d.insert_new(&mut a, e, h);
            }
        }
        let mut max_chain = 0;
        let mut total = 0u64;
        for t in 0..2 {
            for i in 0..d.size(t) {
                let mut n = 0;
                let mut e = d.bucket(&a, t, i);
                while e != NULL {
                    n += 1;
                    e = entry_next(&a, e);
                }
                total += n;
                max_chain = max_chain.max(n);
            }
        }
        eprintln!(
            "len={} buckets={} rehashing={} max_chain={max_chain} total={total}",
            d.len(),
            d.buckets(),
            d.is_rehashing()
        );
        assert_eq!(total, d.len());
        assert!(max_chain < 16, "max chain {max_chain}");
    }
}
