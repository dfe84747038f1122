//! Keyspace events the keyspace itself causes (lazy and active expiry, eviction, a read
//! that misses, a key created), recorded for the command layer to publish as keyspace
//! notifications: the keyspace knows nothing of pub/sub, so it only writes them down
//! here, in the order they happened, and the layer above drains the record
//! (`commands::notify`) before publishing a command's own events, after each command and
//! after each cron step, which keeps Redis's order.
//!
//! Nothing is recorded unless `record` asks for that kind (a bit per kind, set from
//! `notify-keyspace-events`), so with notifications off the cost is one test of a byte.
//! The record is bounded ([`MAX_EVENTS`]): active expiry stops its cycle when the record
//! is full (the next cron step goes on), and an event that would overflow it otherwise
//! (one command lazily expiring more keys than that) is counted in `dropped`, not kept.

use super::Keyspace;

/// What happened to a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyEventKind {
    /// Deleted by lazy or active expiry (class `x`, event `expired`).
    Expired = 1,
    /// Deleted by maxmemory eviction (class `e`, event `evicted`).
    Evicted = 2,
    /// A read found no such key (class `m`, event `keymiss`).
    KeyMiss = 4,
    /// A key was created (class `n`, event `new`).
    New = 8,
}

/// How many events the record holds before it drops (see the module note).
pub const MAX_EVENTS: usize = 65_536;

/// One recorded event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyEvent {
    pub kind: KeyEventKind,
    pub db: usize,
    pub key: Vec<u8>,
}

/// The record: which kinds to keep, the events in order, how many were dropped.
#[derive(Default, Debug)]
pub struct KeyEvents {
    /// `KeyEventKind` bits to record (0: nothing; the only check on the hot paths).
    pub record: u8,
    pub events: Vec<KeyEvent>,
    pub dropped: u64,
}

impl KeyEvents {
    #[inline]
    pub fn wants(&self, kind: KeyEventKind) -> bool {
        self.record & kind as u8 != 0
    }

    /// True when the record can take no more (active expiry pauses then).
    pub fn is_full(&self) -> bool {
        self.events.len() >= MAX_EVENTS
    }

    /// Takes the recorded events, oldest first.
    pub fn take(&mut self) -> Vec<KeyEvent> {
        std::mem::take(&mut self.events)
    }

    fn push(&mut self, kind: KeyEventKind, db: usize, key: &[u8]) {
        if self.is_full() {
            self.dropped += 1;
            return;
        }
        self.events.push(KeyEvent {
            kind,
            db,
            key: key.to_vec(),
        });
    }
}

impl Keyspace {
    /// Records `kind` for `key` when notifications want it.
    #[inline]
    pub fn record_event(&mut self, kind: KeyEventKind, db: usize, key: &[u8]) {
        if self.events.wants(kind) {
            self.events.push(kind, db, key);
        }
    }

    /// Records `kind` for entry `e`'s key when notifications want it.
    #[inline]
    pub fn record_entry_event(&mut self, kind: KeyEventKind, db: usize, e: crate::arena::Ref) {
        if self.events.wants(kind) {
            let key = self.key(e).to_vec();
            self.events.push(kind, db, &key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_only_what_is_asked_and_stays_bounded() {
        let mut ev = KeyEvents::default();
        assert!(!ev.wants(KeyEventKind::Expired));
        ev.record = KeyEventKind::Expired as u8;
        assert!(ev.wants(KeyEventKind::Expired));
        assert!(!ev.wants(KeyEventKind::New));
        for i in 0..MAX_EVENTS + 3 {
            ev.push(KeyEventKind::Expired, 0, format!("k{i}").as_bytes());
        }
        assert!(ev.is_full());
        assert_eq!(ev.dropped, 3);
        let taken = ev.take();
        assert_eq!(taken.len(), MAX_EVENTS);
        assert_eq!(taken[0].key, b"k0");
        assert!(ev.events.is_empty());
    }
}
