//! A growable array of `u32` in the arena, stored as fixed-size chunks so that growing it
//! never copies more than the (tiny) chunk directory: a push is O(1) worst case, which keeps
//! work proportional to the dataset off the executor.

use super::validate::{Claims, Corrupt};
use super::{Arena, Pod, Ref, NULL};

/// Elements per chunk (64 KiB chunks).
pub const CHUNK_ELEMS: usize = 16 * 1024;

#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct ChunkedVecHeader {
    /// Array of `dir_cap` chunk refs.
    pub dir: Ref,
    pub dir_cap: u32,
    pub len: u64,
}
unsafe impl Pod for ChunkedVecHeader {}

impl ChunkedVecHeader {
    pub fn len(&self) -> usize {
        self.len as usize
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn chunk(&self, arena: &Arena, i: usize) -> Ref {
        arena.read_u32(self.dir, (i / CHUNK_ELEMS) * 4)
    }

    pub fn get(&self, arena: &Arena, i: usize) -> u32 {
        assert!(i < self.len(), "chunked index {i} out of {}", self.len);
        arena.read_u32(self.chunk(arena, i), (i % CHUNK_ELEMS) * 4)
    }

    pub fn set(&self, arena: &mut Arena, i: usize, v: u32) {
        assert!(i < self.len(), "chunked index {i} out of {}", self.len);
        let c = self.chunk(arena, i);
        arena.write_u32(c, (i % CHUNK_ELEMS) * 4, v);
    }

    /// Appends `v`, returning its index.
    pub fn push(&mut self, arena: &mut Arena, v: u32) -> usize {
        let i = self.len();
        let chunk_idx = i / CHUNK_ELEMS;
        if i.is_multiple_of(CHUNK_ELEMS) {
            if chunk_idx as u32 >= self.dir_cap {
                let new_cap = (self.dir_cap * 2).max(4);
                let nd = arena.alloc_zeroed(new_cap as usize * 4);
                if self.dir != NULL {
                    arena.copy_within(self.dir, 0, nd, 0, self.dir_cap as usize * 4);
                    arena.free(self.dir, self.dir_cap as usize * 4);
                }
                self.dir = nd;
                self.dir_cap = new_cap;
            }
            let c = arena.alloc(CHUNK_ELEMS * 4);
            arena.write_u32(self.dir, chunk_idx * 4, c);
        }
        self.len += 1;
        self.set(arena, i, v);
        i
    }

    /// Removes element `i` by moving the last element into its place. Returns the value
    /// that now sits at `i` (if any element moved), so the caller can fix back-references.
    pub fn swap_remove(&mut self, arena: &mut Arena, i: usize) -> Option<u32> {
        let last = self.len() - 1;
        let moved = if i != last {
            let v = self.get(arena, last);
            self.set(arena, i, v);
            Some(v)
        } else {
            None
        };
        self.len -= 1;
        if last.is_multiple_of(CHUNK_ELEMS) {
            // The last chunk became empty: give it back.
            let c = self.chunk(arena, last);
            arena.free(c, CHUNK_ELEMS * 4);
            arena.write_u32(self.dir, (last / CHUNK_ELEMS) * 4, NULL);
        }
        moved
    }

    /// Frees all memory. O(chunks), i.e. O(len / 16384).
    pub fn free_all(&mut self, arena: &mut Arena) {
        let chunks = self.len().div_ceil(CHUNK_ELEMS);
        for c in 0..chunks {
            let r = arena.read_u32(self.dir, c * 4);
            arena.free(r, CHUNK_ELEMS * 4);
        }
        if self.dir != NULL {
            arena.free(self.dir, self.dir_cap as usize * 4);
        }
        *self = ChunkedVecHeader::default();
    }
}

impl ChunkedVecHeader {
    /// Claims the directory and chunks of an array restored from an image (`at`: where
    /// its header lies): a directory of a power-of-two capacity (as `push` grows it)
    /// holding exactly the chunks `len` needs. The elements are the owner's to check.
    pub fn validate_blocks(&self, a: &Arena, claims: &mut Claims, at: u64) -> Result<(), Corrupt> {
        if self.dir == NULL {
            if self.dir_cap != 0 || self.len != 0 {
                return Err(Corrupt::new(
                    format!("chunked array of {} elements without a directory", self.len),
                    at,
                ));
            }
            return Ok(());
        }
        let chunks = self.len.div_ceil(CHUNK_ELEMS as u64);
        if !self.dir_cap.is_power_of_two()
            || self.dir_cap < 4
            || self.dir_cap > 1 << 24
            || chunks > self.dir_cap as u64
        {
            return Err(Corrupt::new(
                format!(
                    "chunked array of {} elements with a directory of {} chunks",
                    self.len, self.dir_cap
                ),
                at,
            ));
        }
        claims.claim(self.dir, self.dir_cap as u64 * 4, "chunked array directory")?;
        for c in 0..chunks as usize {
            let r = a.read_u32(self.dir, c * 4);
            claims.claim(r, (CHUNK_ELEMS * 4) as u64, "chunked array chunk")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_get_swap_remove_across_chunks() {
        let mut a = Arena::new(256 << 20, [0, 0]).unwrap();
        let before = a.used_bytes();
        let mut v = ChunkedVecHeader::default();
        let n = CHUNK_ELEMS * 3 + 17;
        for i in 0..n {
            assert_eq!(v.push(&mut a, i as u32 * 3), i);
        }
        assert_eq!(v.get(&a, CHUNK_ELEMS + 5), (CHUNK_ELEMS as u32 + 5) * 3);
        let moved = v.swap_remove(&mut a, 0);
        assert_eq!(moved, Some((n as u32 - 1) * 3));
        assert_eq!(v.get(&a, 0), (n as u32 - 1) * 3);
        while !v.is_empty() {
            let last = v.len() - 1;
            assert_eq!(v.swap_remove(&mut a, last), None);
        }
        v.free_all(&mut a);
        assert_eq!(a.used_bytes(), before);
    }
}
