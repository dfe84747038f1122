//! Checking an arena restored from a snapshot image before anything trusts it.
//!
//! An image is input, not memory: its CRCs only say the bytes are the ones written, and
//! anyone can recompute them. So every structure the server will touch is walked once at
//! load (`keyspace::validate`), and every block it reaches is *claimed* here: a claim
//! checks that the block lies inside the allocated part of the region (above the header,
//! below the bump), that a large block is page aligned, and that no byte of it belongs
//! to another claimed block (live or free). The claims are a bitmap with one bit per
//! 8-byte unit of the bump (1/64 of the arena, dropped after the check). A structure
//! reached twice (a cycle, two owners, a live block on a free list) is therefore an
//! overlap. At the end the allocator's counters must equal what the walk found, so every
//! later `free` and `alloc` keeps them exact.

use super::{
    size_class, Arena, Ref, ALIGN_BYTES, HEADER_BYTES, LARGE_BLOCK_BYTES, NULL, PAGE_BYTES,
};

/// A structure in the arena that is not what the code writes: what, and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} at arena offset {offset}")]
pub struct Corrupt {
    pub what: String,
    /// Byte offset in the arena of the structure (or the reference) found wrong.
    pub offset: u64,
}

impl Corrupt {
    pub fn new(what: impl Into<String>, offset: u64) -> Corrupt {
        Corrupt {
            what: what.into(),
            offset,
        }
    }
    /// The same failure at the place of reference `r`.
    pub fn at(what: impl Into<String>, r: Ref) -> Corrupt {
        Corrupt::new(what, r as u64 * ALIGN_BYTES as u64)
    }
}

/// What the walk found allocated and free, against which the header's counters are
/// checked at the end.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Tally {
    pub live_blocks: u64,
    /// Class bytes of live blocks.
    pub live_bytes: u64,
    /// Sizes callers asked for, as the allocator counts them.
    pub requested_bytes: u64,
    pub free_small_bytes: u64,
    pub free_large_bytes: u64,
}

/// The blocks claimed so far (see the module comment).
pub struct Claims {
    bump_bytes: u64,
    units: Vec<u64>,
    pub tally: Tally,
}

impl Claims {
    pub fn new(arena: &Arena) -> Claims {
        let bump_bytes = arena.bump_bytes();
        let unit_count = bump_bytes.div_ceil(ALIGN_BYTES as u64);
        Claims {
            bump_bytes,
            units: vec![0u64; unit_count.div_ceil(64) as usize],
            tally: Tally::default(),
        }
    }

    /// Checks that `len` bytes at `r` lie inside the allocated part of the arena (so they
    /// can be read), without claiming them: for reading a block's own header, which says
    /// how big the block is, before claiming it.
    pub fn peek(&self, r: Ref, len: u64, what: &str) -> Result<(), Corrupt> {
        let start = r as u64 * ALIGN_BYTES as u64;
        if r == NULL {
            return Err(Corrupt::new(format!("{what}: null reference"), 0));
        }
        if start < HEADER_BYTES as u64 || start.saturating_add(len) > self.bump_bytes {
            return Err(Corrupt::new(
                format!(
                    "{what} ({len} bytes) lies outside the allocated arena ({} bytes)",
                    self.bump_bytes
                ),
                start,
            ));
        }
        Ok(())
    }

    /// Claims a live block allocated with `size` bytes at `r`.
    pub fn claim(&mut self, r: Ref, size: u64, what: &str) -> Result<(), Corrupt> {
        let class_bytes = self.mark(r, size, what)?;
        self.tally.live_blocks += 1;
        self.tally.live_bytes += class_bytes;
        self.tally.requested_bytes += size;
        Ok(())
    }

    /// Claims a free block of class size `class_bytes` at `r`.
    fn claim_free(&mut self, r: Ref, class_bytes: u64, what: &str) -> Result<(), Corrupt> {
        self.mark(r, class_bytes, what)?;
        if class_bytes >= LARGE_BLOCK_BYTES as u64 {
            self.tally.free_large_bytes += class_bytes;
        } else {
            self.tally.free_small_bytes += class_bytes;
        }
        Ok(())
    }

    /// Marks the units of a block of `size` bytes (its class size) at `r`; returns the
    /// class size.
    fn mark(&mut self, r: Ref, size: u64, what: &str) -> Result<u64, Corrupt> {
        self.peek(r, size, what)?;
        let class_bytes = size_class(size as usize).1 as u64;
        self.peek(r, class_bytes, what)?;
        let start = r as u64 * ALIGN_BYTES as u64;
        if class_bytes >= LARGE_BLOCK_BYTES as u64 && !start.is_multiple_of(PAGE_BYTES as u64) {
            return Err(Corrupt::new(
                format!("{what}: a block of {class_bytes} bytes that is not page aligned"),
                start,
            ));
        }
        let first = r as u64;
        let end = first + class_bytes / ALIGN_BYTES as u64;
        let mut unit = first;
        while unit < end {
            let word = (unit / 64) as usize;
            let bit = unit % 64;
            let n = (64 - bit).min(end - unit);
            let mask = if n == 64 {
                u64::MAX
            } else {
                ((1u64 << n) - 1) << bit
            };
            if self.units[word] & mask != 0 {
                return Err(Corrupt::new(
                    format!(
                        "{what} ({class_bytes} bytes) overlaps another block or is reached twice"
                    ),
                    start,
                ));
            }
            self.units[word] |= mask;
            unit += n;
        }
        Ok(class_bytes)
    }
}

impl Arena {
    /// Walks every free list (each block inside the bump, of its class, page aligned when
    /// large, claimed once) and marks every free large block "not zeroed": an image's
    /// pages are not known to be zero past a free block's first page, and
    /// `alloc_zeroed` must not trust a crafted marker.
    pub fn validate_free_lists(&mut self, claims: &mut Claims) -> Result<(), Corrupt> {
        let mut size = 1usize;
        let mut class = 0usize;
        while class < super::NUM_CLASSES {
            let (idx, class_bytes) = size_class(size);
            debug_assert_eq!(idx, class);
            let what = format!("free-list block of class {class} ({class_bytes} bytes)");
            let mut r = self.header().free_heads[class];
            while r != NULL {
                claims.claim_free(r, class_bytes as u64, &what)?;
                if class_bytes >= LARGE_BLOCK_BYTES {
                    self.write_u32(r, 4, super::LARGE_FREE_NOT_ZEROED);
                }
                r = self.read_u32(r, 0);
            }
            class += 1;
            size = class_bytes + 1;
        }
        Ok(())
    }

    /// After the walk: the header's counters must be what the walk found (the first
    /// allocation or free would otherwise start from a lie, and an underflow is a panic).
    pub fn validate_counters(&self, claims: &Claims) -> Result<(), Corrupt> {
        let h = self.header();
        let t = &claims.tally;
        let header = HEADER_BYTES as u64;
        let checks: [(&str, u64, u64); 5] = [
            ("live blocks", h.live_blocks, t.live_blocks),
            ("bytes in use", h.used_bytes, header + t.live_bytes),
            (
                "requested bytes",
                h.requested_bytes,
                header + t.requested_bytes,
            ),
            ("small free-list bytes", h.free_bytes[0], t.free_small_bytes),
            ("large free-list bytes", h.free_bytes[1], t.free_large_bytes),
        ];
        for (what, recorded, found) in checks {
            if recorded != found {
                return Err(Corrupt::new(
                    format!(
                        "the arena header counts {recorded} {what}, the structures hold {found}"
                    ),
                    0,
                ));
            }
        }
        Ok(())
    }

    /// Zeroes the region between the bump and the end of the image: allocations past the
    /// bump (and `alloc_zeroed` of a large block, which clears only its first page) rely
    /// on fresh memory being zero, which a crafted image need not respect.
    pub fn clear_above_bump(&mut self, image_bytes: u64) {
        let bump = self.bump_bytes() as usize;
        let end = (image_bytes as usize).min(self.reserved_bytes);
        if end <= bump {
            return;
        }
        let page_end = bump.next_multiple_of(PAGE_BYTES).min(end);
        // SAFETY: [bump, end) lies inside our mapping (end <= reserved_bytes); nothing
        // references memory above the bump.
        unsafe {
            std::ptr::write_bytes(self.base.add(bump), 0, page_end - bump);
            if end > page_end {
                libc::madvise(
                    self.base.add(page_end) as *mut libc::c_void,
                    end - page_end,
                    libc::MADV_DONTNEED,
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arena::{class_size, NUM_CLASSES};

    #[test]
    fn claims_refuse_overlaps_and_blocks_outside_the_bump() {
        let mut a = Arena::new(64 << 20, [1, 2]).unwrap();
        let x = a.alloc(40);
        let y = a.alloc(40);
        let mut c = Claims::new(&a);
        c.claim(x, 40, "x").unwrap();
        let err = c.claim(x + 1, 8, "inside x").unwrap_err();
        assert!(err.what.contains("overlaps"), "{err}");
        c.claim(y, 40, "y").unwrap();
        assert!(c.claim(y + 5, 8, "past the bump").is_err());
        assert!(c.claim(1, 8, "in the header").is_err());
        assert!(c.claim(NULL, 8, "null").is_err());
        assert_eq!(c.tally.live_blocks, 2);
        a.validate_counters(&c).unwrap();
    }

    #[test]
    fn free_lists_and_counters_check_out_on_a_real_arena() {
        let mut a = Arena::new(64 << 20, [1, 2]).unwrap();
        let keep = a.alloc(100);
        let gone = a.alloc(100);
        let big = a.alloc(100_000);
        a.free(gone, 100);
        a.free(big, 100_000);
        let mut c = Claims::new(&a);
        c.claim(keep, 100, "kept").unwrap();
        a.validate_free_lists(&mut c).unwrap();
        a.validate_counters(&c).unwrap();
        // A free-list head pointing into a live block is an overlap.
        let (class, _) = size_class(100);
        a.header_mut().free_heads[class] = keep;
        let mut c = Claims::new(&a);
        c.claim(keep, 100, "kept").unwrap();
        assert!(a.validate_free_lists(&mut c).is_err());
    }

    /// Below the split threshold an empty class is served by cutting a larger free block:
    /// the pieces and the remainder land on the free lists, the counters and the walk
    /// still agree, a zeroed allocation from a recycled large block is zero, and nothing
    /// comes from the bump.
    #[test]
    fn splitting_a_larger_free_block_keeps_the_free_lists_exact() {
        let mut a = Arena::new(64 << 20, [1, 2]).unwrap();
        let keep = a.alloc(100);
        let big = a.alloc(200_000);
        a.bytes_mut(big, 0, 200_000).fill(0xAB);
        a.free(big, 200_000);
        let bump = a.headroom_bytes();
        // Above the threshold the bump serves as before.
        a.set_split_below(0);
        let fresh = a.alloc(48);
        assert_eq!(a.headroom_bytes(), bump - 48);
        a.free(fresh, 48);
        let bump = a.headroom_bytes();
        a.set_split_below(u64::MAX);
        let (free_small, free_large) = a.free_list_bytes();
        // A large class from the large block, zero-filled, then small ones from the rest.
        let z = a.alloc_zeroed(40_000);
        assert!(a.bytes(z, 0, 40_000).iter().all(|&b| b == 0));
        let mut small = Vec::new();
        for _ in 0..2000 {
            small.push(a.alloc(24));
        }
        assert_eq!(a.headroom_bytes(), bump, "nothing from the bump");
        let (s2, l2) = a.free_list_bytes();
        assert!(s2 + l2 < free_small + free_large);
        let mut c = Claims::new(&a);
        c.claim(keep, 100, "kept").unwrap();
        c.claim(z, 40_000, "zeroed").unwrap();
        for &r in &small {
            c.claim(r, 24, "small").unwrap();
        }
        a.validate_free_lists(&mut c).unwrap();
        a.validate_counters(&c).unwrap();
        // Freed again, everything still checks out.
        for r in small {
            a.free(r, 24);
        }
        a.free(z, 40_000);
        let mut c = Claims::new(&a);
        c.claim(keep, 100, "kept").unwrap();
        a.validate_free_lists(&mut c).unwrap();
        a.validate_counters(&c).unwrap();
    }

    #[test]
    fn class_sizes_invert_size_class() {
        for idx in 0..NUM_CLASSES {
            let size = class_size(idx);
            assert_eq!(size_class(size), (idx, size), "class {idx}");
        }
    }
}
