//! Client-side caching bookkeeping (Redis's tracking table): which clients may hold which
//! keys in their local cache, the prefixes BCAST clients follow, and the invalidations a
//! change produced that the server has yet to deliver.
//!
//! The table holds client ids only, like the WATCH table: the keyspace records what must
//! be invalidated and for whom; the server (which owns the clients and their outboxes)
//! turns each [`Pending`] into a push or a pub/sub message. Keys are tracked by name
//! across databases, as Redis does: a change to `k` in any db invalidates `k`.
//!
//! Costs: with no tracking client, a change costs one emptiness check. A tracked key's
//! change is one map lookup plus its trackers; a BCAST change is one comparison per
//! distinct prefix followed.

use std::collections::{BTreeMap, HashMap};

/// What a tracking client asked for (`CLIENT TRACKING ON ...`); lives on the client.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientTracking {
    /// Client id invalidations go to; 0 = the client itself.
    pub redirect: u64,
    /// The redirect target's slot in the server's client table when tracking was turned
    /// on (checked against `redirect` at each use: slots are reused).
    pub redirect_slot: usize,
    pub bcast: bool,
    pub optin: bool,
    pub optout: bool,
    pub noloop: bool,
    /// CLIENT CACHING yes (OPTIN) / no (OPTOUT) was given for the next command.
    pub caching: bool,
    /// The redirect target went away (CLIENT LIST flag `R`).
    pub broken_redirect: bool,
    /// BCAST prefixes in the order given; BCAST without PREFIX follows the empty prefix
    /// (every key), as Redis lists it.
    pub prefixes: Vec<Vec<u8>>,
}

impl ClientTracking {
    /// Whether a read by this client now is remembered (OPTIN needs CACHING yes before
    /// the command, OPTOUT is silenced by CACHING no).
    pub fn remembers_reads(&self) -> bool {
        let opted_out = if self.optin {
            !self.caching
        } else {
            self.optout && self.caching
        };
        !self.bcast && !opted_out
    }
}

/// An invalidation the server has to deliver.
#[derive(Debug, PartialEq, Eq)]
pub enum Pending {
    /// `key` changed; `ids` are the clients that read it since their last invalidation.
    Key { key: Vec<u8>, ids: Vec<u64> },
    /// A database was flushed: every tracking client gets a null ("all keys").
    Flush,
}

/// One prefix's delivery for a turn: its followers, and the keys changed under it, each
/// with the id of the client that changed it last.
pub type Broadcast = (Vec<u64>, Vec<(Vec<u8>, u64)>);

/// Keys modified in this turn under one BCAST prefix, each with the id of the client
/// whose command changed it last (0: no client, e.g. active expiry), for NOLOOP.
#[derive(Default, Debug)]
struct Prefix {
    clients: Vec<u64>,
    keys: BTreeMap<Vec<u8>, u64>,
}

#[derive(Default, Debug)]
pub struct Tracking {
    /// Every client with tracking on: id → its slot in the server's client table.
    clients: HashMap<u64, usize>,
    /// Key → clients that may cache it (default mode only).
    table: HashMap<Vec<u8>, Vec<u64>>,
    /// Ids stored across the table (INFO `tracking_total_items`).
    total_items: u64,
    /// BCAST prefixes followed by at least one client.
    prefixes: BTreeMap<Vec<u8>, Prefix>,
    /// The client whose command is running (0 between commands): NOLOOP compares against
    /// it, and its own invalidations go after its reply.
    pub current: u64,
    pending: Vec<Pending>,
    /// Consecutive limit passes that could not get under `tracking-table-max-keys`
    /// (each one tries harder, as Redis's trackingLimitUsedSlots).
    limit_passes_over: u32,
}

impl Tracking {
    /// No client tracks anything: changes need no bookkeeping.
    #[inline]
    pub fn is_off(&self) -> bool {
        self.clients.is_empty()
    }

    pub fn tracking_clients(&self) -> usize {
        self.clients.len()
    }
    pub fn total_keys(&self) -> usize {
        self.table.len()
    }
    pub fn total_items(&self) -> u64 {
        self.total_items
    }
    pub fn total_prefixes(&self) -> usize {
        self.prefixes.len()
    }

    /// The slot of tracking client `id`, if it is tracking.
    pub fn slot_of(&self, id: u64) -> Option<usize> {
        self.clients.get(&id).copied()
    }

    /// Every tracking client: (id, slot).
    pub fn clients(&self) -> impl Iterator<Item = (u64, usize)> + '_ {
        self.clients.iter().map(|(&id, &slot)| (id, slot))
    }

    /// Turns tracking on for client `id` at `slot`, following `prefixes` (BCAST; the
    /// empty prefix follows every key).
    pub fn enable(&mut self, id: u64, slot: usize, prefixes: &[Vec<u8>]) {
        self.clients.insert(id, slot);
        for p in prefixes {
            let entry = self.prefixes.entry(p.clone()).or_default();
            if !entry.clients.contains(&id) {
                entry.clients.push(id);
            }
        }
    }

    /// Turns tracking off for client `id`, which followed `prefixes`. Its entries in the
    /// key table go lazily, at the next change of each key (as Redis: a client that
    /// cached many keys costs nothing to drop).
    pub fn disable(&mut self, id: u64, prefixes: &[Vec<u8>]) {
        self.clients.remove(&id);
        for p in prefixes {
            if let Some(entry) = self.prefixes.get_mut(p) {
                entry.clients.retain(|&c| c != id);
                if entry.clients.is_empty() {
                    self.prefixes.remove(p);
                }
            }
        }
    }

    /// Remembers that client `id` read `key` (it may now cache it).
    pub fn remember(&mut self, id: u64, key: &[u8]) {
        let ids = match self.table.get_mut(key) {
            Some(ids) => ids,
            None => self.table.entry(key.to_vec()).or_default(),
        };
        if !ids.contains(&id) {
            ids.push(id);
            self.total_items += 1;
        }
    }

    /// `key` changed (Redis's trackingInvalidateKey with bcast): its trackers are due an
    /// invalidation and forget it; BCAST prefixes it falls under note it for the end of
    /// the turn.
    #[inline]
    pub fn touch(&mut self, key: &[u8]) {
        if self.clients.is_empty() {
            return;
        }
        self.touch_slow(key, true);
    }

    fn touch_slow(&mut self, key: &[u8], bcast: bool) {
        if bcast && !self.prefixes.is_empty() {
            let current = self.current;
            for (p, entry) in self.prefixes.iter_mut() {
                if key.starts_with(p) {
                    entry.keys.insert(key.to_vec(), current);
                }
            }
        }
        if let Some(ids) = self.table.remove(key) {
            self.total_items -= ids.len() as u64;
            self.pending.push(Pending::Key {
                key: key.to_vec(),
                ids,
            });
        }
    }

    /// Databases were flushed: every tracking client is due a null invalidation, and the
    /// table is dropped (Redis's trackingInvalidateKeysOnFlush).
    pub fn flush(&mut self) {
        if !self.clients.is_empty() && self.pending.last() != Some(&Pending::Flush) {
            self.pending.push(Pending::Flush);
        }
        self.table = HashMap::new();
        self.total_items = 0;
    }

    /// The invalidations due, in the order the changes happened.
    pub fn take_pending(&mut self) -> Vec<Pending> {
        std::mem::take(&mut self.pending)
    }

    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// The keys each prefix's followers are due this turn: (follower ids, keys with the
    /// id of their last modifier). Clears the per-turn key sets.
    pub fn take_broadcasts(&mut self) -> Vec<Broadcast> {
        let mut out = Vec::new();
        for entry in self.prefixes.values_mut() {
            if entry.keys.is_empty() {
                continue;
            }
            let keys = std::mem::take(&mut entry.keys).into_iter().collect();
            out.push((entry.clients.clone(), keys));
        }
        out
    }

    /// Keeps the table within `max_keys` (0: no limit) by invalidating keys as if they
    /// changed (BCAST followers are not told: nothing changed). Each pass that ends still
    /// over the limit makes the next one try 100 keys more, as Redis does.
    pub fn limit_keys(&mut self, max_keys: usize) {
        if max_keys == 0 || self.table.len() <= max_keys {
            self.limit_passes_over = 0;
            return;
        }
        let effort = 100usize.saturating_mul(self.limit_passes_over as usize + 1);
        let over = self.table.len() - max_keys;
        // The map's iteration order is its hash order: an arbitrary pick of keys, in one
        // pass over at most `effort` of them.
        let victims: Vec<Vec<u8>> = self.table.keys().take(effort.min(over)).cloned().collect();
        for k in victims {
            self.touch_slow(&k, false);
        }
        if self.table.len() > max_keys {
            self.limit_passes_over = self.limit_passes_over.saturating_add(1);
        } else {
            self.limit_passes_over = 0;
        }
    }
}

/// Prefixes a client wants to follow must not overlap one another or those it already
/// follows; the error text names the first clash, as Redis 7.0.
pub fn prefix_collision(existing: &[Vec<u8>], given: &[Vec<u8>]) -> Option<String> {
    fn overlap(a: &[u8], b: &[u8]) -> bool {
        let n = a.len().min(b.len());
        a[..n] == b[..n]
    }
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    for (i, p) in given.iter().enumerate() {
        if let Some(e) = existing.iter().find(|e| overlap(e, p)) {
            return Some(format!(
                "ERR Prefix '{}' overlaps with an existing prefix '{}'. Prefixes for a single client must not overlap.",
                text(p),
                text(e)
            ));
        }
        if let Some(q) = given[i + 1..].iter().find(|q| overlap(p, q)) {
            return Some(format!(
                "ERR Prefix '{}' overlaps with another provided prefix '{}'. Prefixes for a single client must not overlap.",
                text(p),
                text(q)
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_invalidates_its_readers_once() {
        let mut t = Tracking::default();
        t.enable(7, 0, &[]);
        t.enable(8, 1, &[]);
        t.remember(7, b"k");
        t.remember(8, b"k");
        t.remember(7, b"k");
        assert_eq!(t.total_items(), 2);
        t.touch(b"k");
        t.touch(b"k");
        assert_eq!(
            t.take_pending(),
            vec![Pending::Key {
                key: b"k".to_vec(),
                ids: vec![7, 8]
            }]
        );
        assert_eq!((t.total_keys(), t.total_items()), (0, 0));
    }

    #[test]
    fn bcast_prefixes_collect_keys_per_turn() {
        let mut t = Tracking::default();
        t.enable(3, 0, &[b"user:".to_vec(), b"obj".to_vec()]);
        t.current = 9;
        t.touch(b"user:1");
        t.touch(b"other");
        t.touch(b"object");
        let mut b = t.take_broadcasts();
        b.sort();
        assert_eq!(
            b,
            vec![
                (vec![3], vec![(b"object".to_vec(), 9)]),
                (vec![3], vec![(b"user:1".to_vec(), 9)]),
            ]
        );
        assert!(t.take_broadcasts().is_empty());
        t.disable(3, &[b"user:".to_vec(), b"obj".to_vec()]);
        assert_eq!(t.total_prefixes(), 0);
        assert!(t.is_off());
    }

    #[test]
    fn the_limit_invalidates_keys_until_under_it() {
        let mut t = Tracking::default();
        t.enable(1, 0, &[]);
        for i in 0..50 {
            t.remember(1, format!("k{i}").as_bytes());
        }
        t.limit_keys(20);
        assert_eq!(t.total_keys(), 20);
        assert_eq!(t.take_pending().len(), 30);
        t.limit_keys(0);
        assert_eq!(t.total_keys(), 20);
    }

    #[test]
    fn flush_is_one_null_per_run_of_flushes() {
        let mut t = Tracking::default();
        t.enable(1, 0, &[]);
        t.remember(1, b"a");
        t.flush();
        t.flush();
        assert_eq!(t.take_pending(), vec![Pending::Flush]);
        assert_eq!(t.total_keys(), 0);
    }

    #[test]
    fn overlapping_prefixes_are_named() {
        assert!(prefix_collision(&[], &[b"a".to_vec(), b"b".to_vec()]).is_none());
        let e = prefix_collision(&[b"ab".to_vec()], &[b"a".to_vec()]).unwrap();
        assert!(e.contains("existing prefix 'ab'"), "{e}");
        let e = prefix_collision(&[], &[b"a".to_vec(), b"abc".to_vec()]).unwrap();
        assert!(e.contains("another provided prefix 'abc'"), "{e}");
    }
}
