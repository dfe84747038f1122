//! Out-of-line values: a string value of [`BIG_VALUE_BYTES`](super::BIG_VALUE_BYTES) or
//! more lives in its own arena block, which replies reference without copying (pins) and
//! which a big request argument is read straight into (argument blocks, adopted as the
//! value by a command that stores it). A block no entry references but a reply still
//! pins sits on the arena's orphan list until its last unpin (or the next restart frees
//! it, if a snapshot image caught it).
//!
//! Must not touch: entries' other fields (only the block reference after the key), the
//! dictionaries.

use super::{
    entry_flags, entry_key_len, Keyspace, BIG_HDR, ENTRY_HEADER_BYTES, FLAG_BIG, ROOT_ORPHANS,
};
use crate::arena::{Arena, Ref, NULL};

/// Drops the keyspace's reference to an out-of-line block: freed now, or linked into the
/// arena's orphan list when a reply still references it (freed by the last unpin, or at
/// the next restart if a snapshot image caught it).
pub(super) fn drop_block(a: &mut Arena, pins: &std::collections::HashMap<Ref, u32>, b: Ref) {
    let len = a.read_u32(b, 0) as usize;
    if pins.contains_key(&b) {
        link_orphan(a, b);
    } else {
        a.free(b, BIG_HDR + len);
    }
}

/// Puts an out-of-line block no entry references on the arena's orphan list.
pub(super) fn link_orphan(a: &mut Arena, b: Ref) {
    let head = a.root(ROOT_ORPHANS) as Ref;
    a.write_u32(b, 4, 1);
    a.write_u32(b, 8, NULL);
    a.write_u32(b, 12, head);
    if head != NULL {
        a.write_u32(head, 8, b);
    }
    a.set_root(ROOT_ORPHANS, b as u64);
}

impl Keyspace {
    /// The out-of-line block of a big value, if the entry has one.
    #[inline]
    pub(super) fn big_block(&self, e: Ref) -> Option<Ref> {
        if entry_flags(&self.arena, e) & FLAG_BIG == 0 {
            return None;
        }
        Some(
            self.arena
                .read_u32(e, ENTRY_HEADER_BYTES + entry_key_len(&self.arena, e)),
        )
    }

    /// Whether the entry's value lives in its own block (OBJECT ENCODING stays `raw`).
    pub fn is_big(&self, e: Ref) -> bool {
        entry_flags(&self.arena, e) & FLAG_BIG != 0
    }

    pub(super) fn new_block(&mut self, bytes: &[u8], len: usize) -> Ref {
        if bytes.len() == len && !self.arg_blocks.is_empty() {
            if let Some(b) = self.adopt_arg_block(bytes) {
                return b;
            }
        }
        let b = self.arena.alloc(BIG_HDR + len);
        self.arena.write_u32(b, 0, len as u32);
        self.arena.write_u32(b, 4, 0);
        self.arena.write_u32(b, 8, NULL);
        self.arena.write_u32(b, 12, NULL);
        let n = bytes.len().min(len);
        self.arena
            .bytes_mut(b, BIG_HDR, n)
            .copy_from_slice(&bytes[..n]);
        if len > n {
            self.arena.bytes_mut(b, BIG_HDR + n, len - n).fill(0);
        }
        b
    }

    /// Gives entry `e` a private copy of its block `old` (resized to `len`, zero-filled),
    /// and drops the keyspace's reference to `old`. Returns the new block.
    pub(super) fn replace_block(&mut self, e: Ref, old: Ref, len: usize) -> Ref {
        let old_len = self.arena.read_u32(old, 0) as usize;
        let keep = old_len.min(len);
        let b = self.arena.alloc(BIG_HDR + len);
        self.arena.write_u32(b, 0, len as u32);
        self.arena.write_u32(b, 4, 0);
        self.arena.write_u32(b, 8, NULL);
        self.arena.write_u32(b, 12, NULL);
        self.arena.copy_within(old, BIG_HDR, b, BIG_HDR, keep);
        if len > keep {
            self.arena.bytes_mut(b, BIG_HDR + keep, len - keep).fill(0);
        }
        let kl = entry_key_len(&self.arena, e);
        self.arena.write_u32(e, ENTRY_HEADER_BYTES + kl, b);
        drop_block(&mut self.arena, &self.pins, old);
        b
    }

    /// Takes a reply's reference to entry `e`'s out-of-line value: returns (block, len)
    /// or None when the value is stored in line. The block stays allocated and unchanged
    /// until [`Keyspace::unpin`]: writes copy it, deletions leave it to the last unpin.
    pub fn pin_value(&mut self, e: Ref) -> Option<(Ref, usize)> {
        let b = self.big_block(e)?;
        *self.pins.entry(b).or_insert(0) += 1;
        Some((b, self.arena.read_u32(b, 0) as usize))
    }

    /// A block for a big request argument of `len` bytes, which the connection reads
    /// straight into (`*mut u8` to the bytes; the executor's loop or an I/O thread writes
    /// them). The block starts orphaned (no entry references it, so an image that catches
    /// it frees it at load) and pinned by the connection: a command that stores the
    /// argument as a string value adopts the block instead of copying it
    /// ([`Keyspace::new_block`]), and the pin keeps it intact until the command and its
    /// propagation are done. The connection drops it with [`Keyspace::release_arg_block`].
    ///
    /// A declared length is a claim, not bytes: None (the caller reads the bulk into its
    /// query buffer, which grows only with bytes that arrive) when the claims of every
    /// connection would pass `budget_bytes`, or when the block would eat into the last
    /// `reserve_bytes` of the arena that writes need.
    pub fn try_alloc_arg_block(
        &mut self,
        len: usize,
        budget_bytes: u64,
        reserve_bytes: u64,
    ) -> Option<(Ref, *mut u8)> {
        let over_budget = self.arg_block_bytes.saturating_add(len as u64) > budget_bytes;
        if over_budget || !self.arena.can_alloc(BIG_HDR + len, reserve_bytes) {
            self.stats.request_args_over_budget += 1;
            return None;
        }
        let b = self.arena.try_alloc(BIG_HDR + len).ok()?;
        self.arena.write_u32(b, 0, len as u32);
        link_orphan(&mut self.arena, b);
        *self.pins.entry(b).or_insert(0) += 1;
        let addr = self.block_ptr(b) as *mut u8;
        self.arg_blocks.insert(addr as usize, b);
        self.arg_block_bytes += len as u64;
        self.stats.request_args_in_place += 1;
        Some((b, addr))
    }

    /// The argument block whose bytes are `bytes`, taken over as a value's block.
    fn adopt_arg_block(&mut self, bytes: &[u8]) -> Option<Ref> {
        let b = *self.arg_blocks.get(&(bytes.as_ptr() as usize))?;
        if self.arena.read_u32(b, 0) as usize != bytes.len() {
            return None;
        }
        self.arg_blocks.remove(&(bytes.as_ptr() as usize));
        self.arg_block_bytes -= bytes.len() as u64;
        self.unlink_orphan(b);
        self.stats.request_args_adopted += 1;
        Some(b)
    }

    pub(super) fn unlink_orphan(&mut self, b: Ref) {
        debug_assert_eq!(self.arena.read_u32(b, 4), 1);
        let prev = self.arena.read_u32(b, 8);
        let next = self.arena.read_u32(b, 12);
        if prev == NULL {
            self.arena.set_root(ROOT_ORPHANS, next as u64);
        } else {
            self.arena.write_u32(prev, 12, next);
        }
        if next != NULL {
            self.arena.write_u32(next, 8, prev);
        }
        self.arena.write_u32(b, 4, 0);
        self.arena.write_u32(b, 8, NULL);
        self.arena.write_u32(b, 12, NULL);
    }

    /// A connection is done with its argument block: freed unless a value adopted it.
    pub fn release_arg_block(&mut self, b: Ref) {
        let addr = self.block_ptr(b) as usize;
        if self.arg_blocks.remove(&addr).is_some() {
            self.arg_block_bytes -= self.arena.read_u32(b, 0) as u64;
        }
        self.unpin(b);
    }

    /// Drops a reply's reference; frees the block if the keyspace had dropped it too.
    pub fn unpin(&mut self, b: Ref) {
        let Some(n) = self.pins.get_mut(&b) else {
            debug_assert!(false, "unpin of an unpinned block");
            return;
        };
        *n -= 1;
        if *n > 0 {
            return;
        }
        self.pins.remove(&b);
        if self.arena.read_u32(b, 4) != 0 {
            // Orphaned: unlink from the orphan list and free.
            self.unlink_orphan(b);
            let len = self.arena.read_u32(b, 0) as usize;
            self.arena.free(b, BIG_HDR + len);
        }
    }

    /// A pointer to an out-of-line value's bytes for a socket writer (possibly on an I/O
    /// thread). Valid while the block is pinned: pinned blocks are never written or freed,
    /// and the arena's reservation never moves.
    pub fn block_ptr(&self, b: Ref) -> *const u8 {
        // SAFETY of the offset: the block was allocated with BIG_HDR + len bytes.
        unsafe { self.arena.ptr(b).add(BIG_HDR) as *const u8 }
    }

    /// Blocks currently referenced by replies (tests, INFO).
    pub fn pinned_blocks(&self) -> usize {
        self.pins.len()
    }
}
