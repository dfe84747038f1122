//! Client eviction (`maxmemory-clients`, Redis 7): what the clients' buffers hold, and
//! disconnecting the biggest clients while the total reaches the limit.
//!
//! The socket side (the event loop, or each I/O thread for its connections) measures a
//! connection's buffers — the query bytes not yet run (big arguments included) and the
//! output not yet sent (referenced values included) — into the connection's
//! [`ConnMemory`] and the shared total; the executor decides, in
//! [`super::Server::evict_clients`], before each command (where Redis's processCommand
//! does) and once per loop turn (where Redis's beforeSleep does).

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

/// A [`ConnMemory`] that no longer counts (its connection closed or was evicted).
const NOT_COUNTED: u64 = u64::MAX;

/// The bytes one connection's buffers held when last measured.
#[derive(Debug, Default)]
pub struct ConnMemory {
    bytes: AtomicU64,
    /// Of which output not yet written, as an I/O thread last measured it (0 under the
    /// single-threaded loop, which keeps `Client::obuf_bytes` itself): the executor's
    /// output limits for replicas and pub/sub pushes add it to what it holds.
    unsent_output: AtomicU64,
}

impl ConnMemory {
    pub fn bytes(&self) -> u64 {
        match self.bytes.load(Ordering::Relaxed) {
            NOT_COUNTED => 0,
            b => b,
        }
    }

    pub fn unsent_output_bytes(&self) -> u64 {
        self.unsent_output.load(Ordering::Relaxed)
    }

    pub fn set_unsent_output(&self, bytes: u64) {
        self.unsent_output.store(bytes, Ordering::Relaxed);
    }
}

/// The sum of every counted connection's bytes. Signed: an update and a forget racing on
/// two threads may cross, and the total must not wrap while they do.
#[derive(Debug, Default)]
pub struct ClientMemory {
    total: AtomicI64,
}

impl ClientMemory {
    /// The socket side measured `conn`'s buffers at `bytes` (ignored once it is forgotten).
    pub fn update(&self, conn: &ConnMemory, bytes: u64) {
        let bytes = bytes.min(i64::MAX as u64);
        let swapped = conn
            .bytes
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |old| {
                (old != NOT_COUNTED && old != bytes).then_some(bytes)
            });
        if let Ok(old) = swapped {
            self.total
                .fetch_add(bytes as i64 - old as i64, Ordering::Relaxed);
        }
    }

    /// `conn` closed or is being evicted: its bytes leave the total for good.
    pub fn forget(&self, conn: &ConnMemory) {
        let old = conn.bytes.swap(NOT_COUNTED, Ordering::Relaxed);
        if old != NOT_COUNTED {
            self.total.fetch_sub(old as i64, Ordering::Relaxed);
        }
    }

    pub fn total(&self) -> u64 {
        self.total.load(Ordering::Relaxed).max(0) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_total_follows_updates_and_forgets_for_good() {
        let all = ClientMemory::default();
        let (a, b) = (ConnMemory::default(), ConnMemory::default());
        all.update(&a, 1000);
        all.update(&b, 50);
        assert_eq!(all.total(), 1050);
        all.update(&a, 400);
        assert_eq!((all.total(), a.bytes()), (450, 400));
        all.forget(&a);
        assert_eq!((all.total(), a.bytes()), (50, 0));
        // A measurement after the forget (the socket side had not seen the eviction yet)
        // and a second forget (the close after the eviction) change nothing.
        all.update(&a, 9999);
        all.forget(&a);
        assert_eq!(all.total(), 50);
        all.forget(&b);
        assert_eq!(all.total(), 0);
    }
}
