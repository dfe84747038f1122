//! WATCH bookkeeping (Redis's `watched_keys` dict and touchWatchedKey): per (db, key) the
//! ids of the clients watching it, and the set of clients one of whose watched keys was
//! touched since (their next EXEC fails). A touch costs one map lookup: O(1) plus the
//! key's watchers, whatever the number of clients.

use std::collections::{HashMap, HashSet};

#[derive(Default)]
pub struct Watches {
    by_key: HashMap<(usize, Vec<u8>), Vec<u64>>,
    /// Clients whose transaction is doomed (Redis's CLIENT_DIRTY_CAS).
    dirty: HashSet<u64>,
}

impl Watches {
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }
    /// Registers `client` on a key; false if it already watched it.
    pub fn watch(&mut self, db: usize, key: &[u8], client: u64) -> bool {
        let v = self.by_key.entry((db, key.to_vec())).or_default();
        if v.contains(&client) {
            return false;
        }
        v.push(client);
        true
    }
    pub fn unwatch(&mut self, db: usize, key: &[u8], client: u64) {
        let k = (db, key.to_vec());
        if let Some(v) = self.by_key.get_mut(&k) {
            v.retain(|&c| c != client);
            if v.is_empty() {
                self.by_key.remove(&k);
            }
        }
    }
    /// A key was modified: every client watching it is flagged.
    #[inline]
    pub fn touch(&mut self, db: usize, key: &[u8]) {
        if self.by_key.is_empty() {
            return;
        }
        if let Some(v) = self.by_key.get(&(db, key.to_vec())) {
            self.dirty.extend(v.iter().copied());
        }
    }
    /// The watched keys of `db` (FLUSHDB / FLUSHALL / SWAPDB decide per key).
    pub fn keys_in_db(&self, db: usize) -> Vec<Vec<u8>> {
        self.by_key
            .keys()
            .filter(|k| k.0 == db)
            .map(|k| k.1.clone())
            .collect()
    }
    pub fn flag(&mut self, client: u64) {
        self.dirty.insert(client);
    }
    pub fn is_dirty(&self, client: u64) -> bool {
        self.dirty.contains(&client)
    }
    pub fn clear_dirty(&mut self, client: u64) {
        self.dirty.remove(&client);
    }
}
