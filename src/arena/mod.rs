//! The arena: one large, position-independent memory region that holds *all* keyspace
//! memory — the index, keys, values, expiry data and the allocator's own metadata.
//!
//! Why: the snapshot engine streams the arena's raw pages, and restart maps an image back
//! without parsing. For that the arena must hold no pointer to memory outside itself, and
//! nothing inside it may depend on the address it is mapped at. Every reference inside the
//! arena is therefore a [`Ref`]: a 32-bit offset in 8-byte units from the arena's base
//! (so one arena addresses at most 32 GiB; see ARCHITECTURE.md).
//!
//! The allocator is segregated-fit with size classes (8-byte steps up to 128 B, then eight
//! classes per doubling, ≤ 12.5 % internal waste). Freed blocks go on an intrusive per-class
//! free list whose heads live in the arena header; large blocks (≥ 32 KiB, page aligned) give
//! their pages back to the kernel on free (`MADV_DONTNEED`) so RSS follows live data. The
//! caller passes the size on free (as Rust's `dealloc` does), so blocks carry no header.

pub mod chunked;
pub mod cow;
pub mod dict;
pub mod dirty;
pub mod validate;

use siphasher::sip::SipHasher13;
use std::hash::Hasher;
use std::io;
use std::ptr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Offset of an arena block in 8-byte units. 0 is the null reference (the arena header
/// lives at offset 0, so no block can ever start there).
pub type Ref = u32;
pub const NULL: Ref = 0;

/// Granularity of [`Ref`] offsets and of every block's alignment.
pub const ALIGN_BYTES: usize = 8;
/// Blocks of this class size or more are page aligned and return pages to the kernel on free.
pub const LARGE_BLOCK_BYTES: usize = 32 * 1024;
pub const PAGE_BYTES: usize = 4096;
/// The most a [`Ref`] can address.
pub const ARENA_MAX_BYTES: usize = (u32::MAX as usize + 1) * ALIGN_BYTES;

const SMALL_CLASSES: usize = 16; // 8, 16, ..., 128
const CLASSES_PER_DOUBLING: usize = 8;
/// Classes up to 2^35 bytes (the whole addressable arena).
pub const NUM_CLASSES: usize = SMALL_CLASSES + (35 - 7) * CLASSES_PER_DOUBLING;

const ARENA_MAGIC: u64 = u64::from_le_bytes(*b"CAIRNAR1");
/// Bumped whenever the layout of anything stored in the arena changes. Part of the
/// layout fingerprint that snapshot images carry.
pub const ARENA_LAYOUT_VERSION: u32 = 1;

/// Number of root slots the arena header offers to the structures built on it.
pub const ROOT_SLOTS: usize = 8;

/// Written at offset 4 of a free large block whose pages were *not* given back to the
/// kernel (a snapshot was tracking the region, see [`Arena::set_keep_pages`]): its pages past
/// the first are not known to be zero, so `alloc_zeroed` must clear all of it.
const LARGE_FREE_NOT_ZEROED: u32 = 0xD1A7_0001;

/// Written at offset 4 of a free large block kept resident on purpose (see
/// [`RESIDENT_FREE_BYTES`]): not zero either, and counted in `resident_free_bytes`.
const LARGE_FREE_RESIDENT: u32 = 0xD1A7_0002;

/// Freed large blocks keep their pages, instead of `MADV_DONTNEED`, while the free large
/// blocks kept this way add up to at most this many bytes. A 10 MB value overwritten
/// twice a second otherwise costs the executor a 10 MB `madvise` at each free (1–30 ms
/// measured on a 2-vCPU VM while the log was writing) and 2,560 page faults as the next
/// 10 MB argument is read into a fresh block; reused, the block is already resident.
/// RSS stays above live data by at most this much.
pub const RESIDENT_FREE_BYTES: u64 = 64 << 20;

/// The arena header, at offset 0 of the region. Everything the allocator knows is here.
#[repr(C)]
#[derive(Clone, Copy)]
struct Header {
    magic: u64,
    layout_version: u32,
    header_bytes: u32,
    /// Bytes handed out from the region so far (the high-water mark).
    bump_bytes: u64,
    /// Bytes in live blocks, counted at their class size.
    used_bytes: u64,
    /// Bytes callers asked for in live blocks.
    requested_bytes: u64,
    live_blocks: u64,
    /// Keys for the keyspace's hash function: kept in the image so a restored arena
    /// hashes exactly as before.
    hash_seed: [u64; 2],
    roots: [u64; ROOT_SLOTS],
    free_heads: [Ref; NUM_CLASSES],
    free_bytes: [u64; 2], // [small, large] bytes sitting on free lists
}

/// Size class of a request: (class index, class size in bytes).
#[inline]
pub fn size_class(size: usize) -> (usize, usize) {
    let size = size.max(1);
    if size <= 128 {
        let idx = size.div_ceil(8) - 1;
        return (idx, (idx + 1) * 8);
    }
    let s = size - 1;
    let p = usize::BITS as usize - 1 - s.leading_zeros() as usize; // floor(log2(size-1)), >= 7
    let step_shift = p - 3;
    let k = (s - (1usize << p)) >> step_shift;
    let idx = SMALL_CLASSES + (p - 7) * CLASSES_PER_DOUBLING + k;
    (idx, (1usize << p) + ((k + 1) << step_shift))
}

/// The size of class `idx` (the inverse of [`size_class`]).
pub fn class_size(idx: usize) -> usize {
    if idx < SMALL_CLASSES {
        return (idx + 1) * 8;
    }
    let j = idx - SMALL_CLASSES;
    let p = 7 + j / CLASSES_PER_DOUBLING;
    let k = j % CLASSES_PER_DOUBLING;
    (1usize << p) + ((k + 1) << (p - 3))
}

/// The largest class whose size is at most `bytes` (`bytes` >= 8): (index, size).
fn largest_class_within(bytes: usize) -> (usize, usize) {
    let (idx, size) = size_class(bytes);
    if size == bytes || idx == 0 {
        (idx, size)
    } else {
        (idx - 1, class_size(idx - 1))
    }
}

/// The memory region and its allocator. Owned by the executor thread; not `Sync`.
pub struct Arena {
    base: *mut u8,
    reserved_bytes: usize,
    /// Keyed from the header's `hash_seed`, so hashing survives an image restore.
    hasher: SipHasher13,
    /// While a snapshot tracks the region, freed large blocks keep their pages: a
    /// `MADV_DONTNEED` would zero pages behind the write-protect tracking's back (a zapped
    /// page does not show as written), so the image would keep stale bytes where the live
    /// arena has zeros — and `alloc_zeroed` relies on those zeros.
    keep_pages: bool,
    /// Bytes of free large blocks marked [`LARGE_FREE_RESIDENT`] (an upper bound: a
    /// block split into pieces is counted whole until its pieces are taken).
    resident_free_bytes: u64,
    /// Headroom an optional allocation ([`Arena::try_alloc_zeroed_optional`]) must leave
    /// at the bump: the executor sets it before each write to what the write itself may
    /// still need, so a dict's table growth never takes a command's own room.
    optional_floor_bytes: u64,
    /// Below this headroom at the bump, an allocation whose class has no free block is cut
    /// from a free block of a larger class instead (see [`Arena::split_free`]): the free
    /// lists are per class and the bump never moves back, so without it memory freed in
    /// one class could not serve another once the bump is low, and a flushed arena could
    /// go on refusing writes. 0: never (the bump serves).
    split_below_bytes: u64,
    /// The header's high-water mark, published outside the region for snapshot threads:
    /// they must not load it from the header, which the executor writes with plain
    /// stores (see `persistence::snapshot::racy_copy`). Updated with every move of the
    /// mark (it only grows).
    published_high_water: Arc<AtomicU64>,
    /// While a snapshot tracks the region: the regions this arena's writes touched, for
    /// the snapshot's harvests (see [`dirty`]). Every mutating accessor records into it.
    marks: Option<dirty::ExecMarks>,
    /// The shared map, kept between snapshots once made.
    dirty_map: Option<Arc<dirty::DirtyMap>>,
    /// While a snapshot tracks the region: its copy-before-write capture (see [`cow`]),
    /// which a copy-before-write snapshot installs its cut in. Every mutating accessor
    /// calls its hook before the write.
    capture: Option<Arc<cow::Capture>>,
}

// The executor thread owns the arena, but it is created on another thread and moved there.
unsafe impl Send for Arena {}

#[derive(Debug, thiserror::Error)]
pub enum ArenaError {
    #[error("cannot reserve {bytes} bytes of address space for the arena: {source}")]
    Reserve { bytes: usize, source: io::Error },
    #[error("restored arena is inconsistent: {0}")]
    Corrupt(String),
}

/// The reserved address space has no room for a block of this size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("arena address space exhausted: no room for {wanted_bytes} bytes ({reserved_bytes} bytes reserved)")]
pub struct ArenaFull {
    pub wanted_bytes: usize,
    pub reserved_bytes: usize,
}

/// Size of the arena header at offset 0 (rounded to a cache line). Part of the layout
/// fingerprint of snapshot images.
pub const HEADER_BYTES: usize = std::mem::size_of::<Header>().next_multiple_of(64);
/// Byte offset of the free-list heads (one `Ref` per size class) inside the header (for
/// tools and the crafted-image tests).
pub const FREE_HEADS_OFFSET: usize = std::mem::offset_of!(Header, free_heads);

/// A reserved, zero-filled region not yet holding a valid arena: an image is decompressed
/// into it, then [`Arena::from_region`] checks the header and takes it over.
pub struct RawRegion {
    base: *mut u8,
    reserved_bytes: usize,
}

// The loader fills the region from worker threads before the arena exists.
unsafe impl Send for RawRegion {}

fn reserve(reserved_bytes: usize) -> Result<*mut u8, ArenaError> {
    // SAFETY: an anonymous private mapping with no fixed address has no preconditions.
    let base = unsafe {
        libc::mmap(
            ptr::null_mut(),
            reserved_bytes,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if base == libc::MAP_FAILED {
        return Err(ArenaError::Reserve {
            bytes: reserved_bytes,
            source: io::Error::last_os_error(),
        });
    }
    Ok(base as *mut u8)
}

impl RawRegion {
    pub fn new(reserved_bytes: usize) -> Result<RawRegion, ArenaError> {
        let reserved_bytes = reserved_bytes.clamp(1 << 20, ARENA_MAX_BYTES);
        Ok(RawRegion {
            base: reserve(reserved_bytes)?,
            reserved_bytes,
        })
    }
    pub fn reserved_bytes(&self) -> usize {
        self.reserved_bytes
    }
    /// The bytes `[offset, offset + len)` of the region, or None when out of range.
    pub fn slice_mut(&mut self, offset: u64, len: usize) -> Option<&mut [u8]> {
        let end = offset.checked_add(len as u64)?;
        if end > self.reserved_bytes as u64 {
            return None;
        }
        // SAFETY: in range of our mapping; `&mut self` gives exclusive access.
        Some(unsafe { std::slice::from_raw_parts_mut(self.base.add(offset as usize), len) })
    }
}

impl Drop for RawRegion {
    fn drop(&mut self) {
        if !self.base.is_null() {
            // SAFETY: we own the mapping.
            unsafe { libc::munmap(self.base as *mut libc::c_void, self.reserved_bytes) };
        }
    }
}

/// crc32c of the size-class table: part of an image's layout fingerprint, so a binary
/// whose classes differ (free lists would mean other sizes) refuses the image.
pub fn size_class_table_crc() -> u32 {
    let mut crc = 0u32;
    let mut size = 1usize;
    while size <= ARENA_MAX_BYTES {
        let (idx, class) = size_class(size);
        crc = crc32c::crc32c_append(crc, &(idx as u64).to_le_bytes());
        crc = crc32c::crc32c_append(crc, &(class as u64).to_le_bytes());
        size = class + 1;
    }
    crc
}

impl Arena {
    /// Reserves `reserved_bytes` of address space (nothing is committed until touched).
    pub fn new(reserved_bytes: usize, hash_seed: [u64; 2]) -> Result<Arena, ArenaError> {
        let reserved_bytes = reserved_bytes.clamp(1 << 20, ARENA_MAX_BYTES);
        let base = reserve(reserved_bytes)?;
        let arena = Arena {
            base,
            reserved_bytes,
            hasher: SipHasher13::new_with_keys(hash_seed[0], hash_seed[1]),
            keep_pages: false,
            resident_free_bytes: 0,
            optional_floor_bytes: 0,
            split_below_bytes: 0,
            published_high_water: Arc::new(AtomicU64::new(HEADER_BYTES as u64)),
            marks: None,
            dirty_map: None,
            capture: None,
        };
        let header_bytes = HEADER_BYTES;
        let header = Header {
            magic: ARENA_MAGIC,
            layout_version: ARENA_LAYOUT_VERSION,
            header_bytes: header_bytes as u32,
            bump_bytes: header_bytes as u64,
            used_bytes: header_bytes as u64,
            requested_bytes: header_bytes as u64,
            live_blocks: 0,
            hash_seed,
            roots: [0; ROOT_SLOTS],
            free_heads: [NULL; NUM_CLASSES],
            free_bytes: [0; 2],
        };
        // SAFETY: the region is at least 1 MiB, mapped writable, and aligned to a page.
        unsafe { ptr::write(arena.base as *mut Header, header) };
        arena.check_header();
        Ok(arena)
    }

    /// Takes over a region into which a snapshot image of `image_bytes` bytes was restored.
    /// The header is checked (magic, layout, counters within the image) before anything
    /// trusts it, and the bytes above the bump are zeroed; the structures are checked by
    /// `keyspace::validate::validate_image`, which the loader runs next.
    pub fn from_region(region: RawRegion, image_bytes: u64) -> Result<Arena, ArenaError> {
        if (image_bytes as usize) < HEADER_BYTES || image_bytes as usize > region.reserved_bytes {
            return Err(ArenaError::Corrupt(format!(
                "image of {image_bytes} bytes does not fit a region of {} bytes",
                region.reserved_bytes
            )));
        }
        // SAFETY: the region is mapped and at least HEADER_BYTES long; Header is plain data.
        let h: Header = unsafe { ptr::read(region.base as *const Header) };
        let bad = |what: String| Err(ArenaError::Corrupt(what));
        if h.magic != ARENA_MAGIC {
            return bad(format!("arena header magic is {:#x}", h.magic));
        }
        if h.layout_version != ARENA_LAYOUT_VERSION {
            return bad(format!(
                "arena layout version {} (this binary: {ARENA_LAYOUT_VERSION})",
                h.layout_version
            ));
        }
        if h.header_bytes as usize != HEADER_BYTES {
            return bad(format!("arena header of {} bytes", h.header_bytes));
        }
        if h.bump_bytes > image_bytes || h.bump_bytes < HEADER_BYTES as u64 {
            return bad(format!(
                "high-water mark {} outside the image ({image_bytes} bytes)",
                h.bump_bytes
            ));
        }
        if h.used_bytes > h.bump_bytes {
            return bad(format!(
                "{} bytes in use above a high-water mark of {}",
                h.used_bytes, h.bump_bytes
            ));
        }
        for (class, &head) in h.free_heads.iter().enumerate() {
            if head as u64 * ALIGN_BYTES as u64 >= h.bump_bytes {
                return bad(format!("free list {class} starts outside the arena"));
            }
        }
        let mut arena = Arena {
            base: region.base,
            reserved_bytes: region.reserved_bytes,
            hasher: SipHasher13::new_with_keys(h.hash_seed[0], h.hash_seed[1]),
            keep_pages: false,
            resident_free_bytes: 0,
            optional_floor_bytes: 0,
            split_below_bytes: 0,
            published_high_water: Arc::new(AtomicU64::new(h.bump_bytes)),
            marks: None,
            dirty_map: None,
            capture: None,
        };
        std::mem::forget(region);
        arena.clear_above_bump(image_bytes);
        Ok(arena)
    }

    /// While true, freed large blocks keep their pages (see the field's comment). Set by
    /// the executor for the duration of a snapshot.
    ///
    /// It also arms the dirty map (see [`dirty`]): from here on every write to the region
    /// marks its 64 KiB region, until `keep` is false again.
    pub fn set_keep_pages(&mut self, keep: bool) {
        self.keep_pages = keep;
        if keep && self.marks.is_none() {
            let (base, len) = (self.base as usize, self.reserved_bytes);
            let map = self
                .dirty_map
                .get_or_insert_with(|| Arc::new(dirty::DirtyMap::new(base, len)))
                .clone();
            map.clear();
            dirty::arm(&map);
            self.marks = Some(dirty::ExecMarks::new(map));
            let c = Arc::new(cow::Capture::new(base, len));
            cow::arm(&c);
            self.capture = Some(c);
        } else if !keep {
            if let Some(m) = self.marks.take() {
                dirty::disarm(m.map());
            }
            if let Some(c) = self.capture.take() {
                cow::disarm(&c);
            }
        }
    }

    /// The copy-before-write capture while a snapshot tracks the region (made by
    /// [`Arena::set_keep_pages`]; a snapshot may install its cut in it).
    pub fn capture(&self) -> Option<Arc<cow::Capture>> {
        self.capture.clone()
    }

    /// The dirty map while a snapshot tracks the region (armed by
    /// [`Arena::set_keep_pages`]).
    pub fn dirty_map(&self) -> Option<Arc<dirty::DirtyMap>> {
        self.marks.as_ref().map(|m| m.map().clone())
    }

    /// Publishes the regions written since the last call to the dirty map. The executor
    /// calls it between commands and before it parks or waits (see [`dirty`]).
    #[inline]
    pub fn publish_marks(&mut self) {
        if let Some(m) = &mut self.marks {
            m.publish();
        }
    }

    /// A write to `[off, off+len)` of the region is about to happen: recorded while a
    /// snapshot tracks the region, and the pages a copy-before-write cut still needs are
    /// copied out first. Call before the write (or before handing out the bytes).
    #[inline(always)]
    fn wrote(&mut self, off: usize, len: usize) {
        if let Some(m) = &mut self.marks {
            m.mark(off as u64, len as u64);
            if let Some(c) = &self.capture {
                c.before_write(off, len);
            }
        }
    }

    fn check_header(&self) {
        let h = self.header();
        assert_eq!(h.magic, ARENA_MAGIC, "arena header magic");
        assert_eq!(
            h.layout_version, ARENA_LAYOUT_VERSION,
            "arena layout version"
        );
        assert!(h.bump_bytes as usize <= self.reserved_bytes);
    }

    #[inline]
    fn header(&self) -> &Header {
        // SAFETY: offset 0 always holds an initialised Header (written in `new`).
        unsafe { &*(self.base as *const Header) }
    }

    #[inline]
    fn header_mut(&mut self) -> &mut Header {
        self.wrote(0, std::mem::size_of::<Header>());
        // SAFETY: as `header`; `&mut self` gives exclusive access.
        unsafe { &mut *(self.base as *mut Header) }
    }

    pub fn base_addr(&self) -> usize {
        self.base as usize
    }
    pub fn reserved_bytes(&self) -> usize {
        self.reserved_bytes
    }
    pub fn bump_bytes(&self) -> u64 {
        self.header().bump_bytes
    }
    /// The high-water mark as other threads may read it while the executor allocates
    /// (a snapshot's view of the region): an atomic beside the region, never the header.
    pub fn published_high_water(&self) -> Arc<AtomicU64> {
        self.published_high_water.clone()
    }
    /// Bytes in live blocks at their class size, plus the header.
    pub fn used_bytes(&self) -> u64 {
        self.header().used_bytes
    }
    /// Bytes callers asked for in live blocks, plus the header.
    pub fn requested_bytes(&self) -> u64 {
        self.header().requested_bytes
    }
    pub fn live_blocks(&self) -> u64 {
        self.header().live_blocks
    }
    /// Bytes sitting on the free lists, (small, large).
    pub fn free_list_bytes(&self) -> (u64, u64) {
        let f = self.header().free_bytes;
        (f[0], f[1])
    }
    pub fn hash_seed(&self) -> [u64; 2] {
        self.header().hash_seed
    }
    /// The keyspace hash: SipHash-1-3 keyed by the arena's seed (as Redis, so a client
    /// cannot choose keys that collide).
    #[inline]
    pub fn hash(&self, key: &[u8]) -> u64 {
        let mut h = self.hasher;
        h.write(key);
        h.finish()
    }
    pub fn root(&self, slot: usize) -> u64 {
        self.header().roots[slot]
    }
    pub fn set_root(&mut self, slot: usize, value: u64) {
        self.header_mut().roots[slot] = value;
    }
    /// Room left at the bump before the address space reserved for the arena runs out
    /// (free lists not counted; the server weighs both before admitting a write).
    pub fn headroom_bytes(&self) -> u64 {
        self.reserved_bytes as u64 - self.header().bump_bytes
    }

    /// Allocates a block of at least `size` bytes, 8-byte aligned, contents unspecified.
    ///
    /// Panics if the reserved address space is exhausted. Callers on the request path
    /// never get there: the server refuses writes while [`Arena::headroom_bytes`] is below
    /// its reserve plus what the command may allocate, and the allocations whose size a
    /// client chooses (request argument blocks, a dict's next bucket array) use
    /// [`Arena::try_alloc`] and degrade instead.
    pub fn alloc(&mut self, size: usize) -> Ref {
        match self.try_alloc(size) {
            Ok(r) => r,
            Err(e) => panic!("{e}"),
        }
    }

    /// Allocates a block of at least `size` bytes, or says the address space is exhausted
    /// (free lists first, then the bump; nothing changes on failure).
    pub fn try_alloc(&mut self, size: usize) -> Result<Ref, ArenaFull> {
        let (class, class_bytes) = size_class(size);
        let head = self.header().free_heads[class];
        let (r, recycled) = if head != NULL {
            let next = self.read_u32(head, 0);
            let h = self.header_mut();
            h.free_heads[class] = next;
            h.free_bytes[(class_bytes >= LARGE_BLOCK_BYTES) as usize] -= class_bytes as u64;
            (head, true)
        } else if self.headroom_bytes() < self.split_below_bytes {
            match self.split_free(class, class_bytes) {
                Some(r) => (r, true),
                None => (self.bump(class_bytes)?, false),
            }
        } else {
            (self.bump(class_bytes)?, false)
        };
        if recycled
            && class_bytes >= LARGE_BLOCK_BYTES
            && self.read_u32(r, 4) == LARGE_FREE_RESIDENT
        {
            self.resident_free_bytes = self.resident_free_bytes.saturating_sub(class_bytes as u64);
        }
        let h = self.header_mut();
        h.used_bytes += class_bytes as u64;
        h.requested_bytes += size as u64;
        h.live_blocks += 1;
        Ok(r)
    }

    /// Allocates a zero-filled block (panics as [`Arena::alloc`]).
    pub fn alloc_zeroed(&mut self, size: usize) -> Ref {
        match self.try_alloc_zeroed(size) {
            Ok(r) => r,
            Err(e) => panic!("{e}"),
        }
    }

    /// Allocates a zero-filled block, or says the address space is exhausted.
    pub fn try_alloc_zeroed(&mut self, size: usize) -> Result<Ref, ArenaFull> {
        let r = self.try_alloc(size)?;
        let (_, class_bytes) = size_class(size);
        let mark = if class_bytes >= LARGE_BLOCK_BYTES {
            self.read_u32(r, 4)
        } else {
            0
        };
        if class_bytes >= LARGE_BLOCK_BYTES
            && mark != LARGE_FREE_NOT_ZEROED
            && mark != LARGE_FREE_RESIDENT
        {
            // Only the first page of a recycled large block may be non-zero: the rest was
            // given back with MADV_DONTNEED on free, or never touched.
            let n = PAGE_BYTES.min(size);
            self.bytes_mut(r, 0, n).fill(0);
        } else {
            self.bytes_mut(r, 0, size).fill(0);
        }
        Ok(r)
    }

    /// Sets the headroom under which allocations reuse larger free blocks (see
    /// `split_below_bytes`).
    pub fn set_split_below(&mut self, bytes: u64) {
        self.split_below_bytes = bytes;
    }

    /// Takes a free block of the smallest larger class that has one and cuts it into
    /// blocks of `class` (the first is returned, the rest go on its free list); what is
    /// left at the end goes on the free lists of the largest classes that fit (under 8
    /// bytes is lost). Every piece of a large block keeps the block's zeroing mark: past
    /// the block's first page its bytes are as zero (or not) as the block's were, and each
    /// piece's own first page holds only its link and mark. None: no larger free block.
    fn split_free(&mut self, class: usize, class_bytes: usize) -> Option<Ref> {
        let from = (class + 1..NUM_CLASSES).find(|&c| self.header().free_heads[c] != NULL)?;
        let from_bytes = class_size(from);
        let b = self.header().free_heads[from];
        let next = self.read_u32(b, 0);
        let mark = if from_bytes >= LARGE_BLOCK_BYTES {
            self.read_u32(b, 4)
        } else {
            0
        };
        {
            let h = self.header_mut();
            h.free_heads[from] = next;
            h.free_bytes[(from_bytes >= LARGE_BLOCK_BYTES) as usize] -= from_bytes as u64;
        }
        let at = |off: usize| b + (off / ALIGN_BYTES) as Ref;
        let pieces = from_bytes / class_bytes;
        for k in 1..pieces {
            self.push_free(at(k * class_bytes), class, class_bytes, mark);
        }
        let mut off = pieces * class_bytes;
        while from_bytes - off >= ALIGN_BYTES {
            let (c, c_bytes) = largest_class_within(from_bytes - off);
            if c_bytes >= LARGE_BLOCK_BYTES && !off.is_multiple_of(PAGE_BYTES) {
                break;
            }
            self.push_free(at(off), c, c_bytes, mark);
            off += c_bytes;
        }
        Some(b)
    }

    /// Puts a block of class `class` on its free list (a large one with zeroing `mark`).
    fn push_free(&mut self, r: Ref, class: usize, class_bytes: usize, mark: u32) {
        let large = class_bytes >= LARGE_BLOCK_BYTES;
        if large {
            self.write_u32(r, 4, mark);
        }
        let head = self.header().free_heads[class];
        self.write_u32(r, 0, head);
        let h = self.header_mut();
        h.free_heads[class] = r;
        h.free_bytes[large as usize] += class_bytes as u64;
    }

    /// Sets the headroom optional allocations must leave (see `optional_floor_bytes`).
    pub fn set_optional_floor(&mut self, bytes: u64) {
        self.optional_floor_bytes = bytes;
    }

    /// A zero-filled block the caller can do without (a dict's next, larger table): only
    /// when it leaves the optional floor's headroom at the bump (or a free block fits).
    pub fn try_alloc_zeroed_optional(&mut self, size: usize) -> Result<Ref, ArenaFull> {
        if !self.can_alloc(size, self.optional_floor_bytes) {
            return Err(ArenaFull {
                wanted_bytes: size,
                reserved_bytes: self.reserved_bytes,
            });
        }
        self.try_alloc_zeroed(size)
    }

    /// Whether a block of `size` bytes can be had without touching the bump's last
    /// `reserve_bytes` (a free block of its class, or room at the bump).
    pub fn can_alloc(&self, size: usize, reserve_bytes: u64) -> bool {
        let (class, class_bytes) = size_class(size);
        if self.header().free_heads[class] != NULL {
            return true;
        }
        self.headroom_bytes()
            >= reserve_bytes.saturating_add(class_bytes as u64 + PAGE_BYTES as u64)
    }

    fn bump(&mut self, class_bytes: usize) -> Result<Ref, ArenaFull> {
        let h = self.header();
        let mut start = h.bump_bytes as usize;
        if class_bytes >= LARGE_BLOCK_BYTES {
            start = start.next_multiple_of(PAGE_BYTES);
        }
        let end = start.saturating_add(class_bytes);
        if end > self.reserved_bytes {
            return Err(ArenaFull {
                wanted_bytes: class_bytes,
                reserved_bytes: self.reserved_bytes,
            });
        }
        self.header_mut().bump_bytes = end as u64;
        // Relaxed: a snapshot thread that sees an older mark copies less now and takes the
        // growth in its next pass; its final reading comes after the pause gate's SeqCst
        // hand-over, which orders this store before it.
        self.published_high_water
            .store(end as u64, Ordering::Relaxed);
        Ok((start / ALIGN_BYTES) as Ref)
    }

    /// Frees a block; `size` must be the size it was allocated with.
    pub fn free(&mut self, r: Ref, size: usize) {
        debug_assert!(r != NULL);
        let (class, class_bytes) = size_class(size);
        let large = class_bytes >= LARGE_BLOCK_BYTES;
        if large {
            // Keep the first page (it holds the free-list link); give the rest back, unless
            // a snapshot is tracking the region (then mark the block as not zeroed) or the
            // block fits the resident budget (`RESIDENT_FREE_BYTES`).
            let start = self.ptr(r) as usize + PAGE_BYTES;
            let len = class_bytes - PAGE_BYTES;
            let mark = if self.keep_pages && len > 0 {
                LARGE_FREE_NOT_ZEROED
            } else if len > 0
                && self.resident_free_bytes + class_bytes as u64 <= RESIDENT_FREE_BYTES
            {
                self.resident_free_bytes += class_bytes as u64;
                LARGE_FREE_RESIDENT
            } else {
                0
            };
            self.write_u32(r, 4, mark);
            if len > 0 && mark == 0 {
                // SAFETY: [start, start+len) lies inside this block, page aligned, inside
                // our private mapping. DONTNEED on private anonymous memory zero-fills.
                unsafe { libc::madvise(start as *mut libc::c_void, len, libc::MADV_DONTNEED) };
            }
        }
        let head = self.header().free_heads[class];
        self.write_u32(r, 0, head);
        let h = self.header_mut();
        h.free_heads[class] = r;
        h.free_bytes[large as usize] += class_bytes as u64;
        h.used_bytes -= class_bytes as u64;
        h.requested_bytes -= size as u64;
        h.live_blocks -= 1;
    }

    /// Resizes a block, copying `min(old, new)` bytes when the class changes (panics as
    /// [`Arena::alloc`]).
    pub fn realloc(&mut self, r: Ref, old_size: usize, new_size: usize) -> Ref {
        if size_class(old_size).0 == size_class(new_size).0 {
            let h = self.header_mut();
            h.requested_bytes = h.requested_bytes + new_size as u64 - old_size as u64;
            return r;
        }
        let n = self.alloc(new_size);
        let keep = old_size.min(new_size);
        let to = self.checked_ptr(n, 0, keep);
        self.wrote(n as usize * ALIGN_BYTES, keep);
        // SAFETY: distinct live blocks of at least `keep` bytes each.
        unsafe { ptr::copy_nonoverlapping(self.ptr(r), to, keep) };
        self.free(r, old_size);
        n
    }

    /// The address of `r`'s first byte, checked to lie below the bump (the part of the
    /// region ever handed out). Dereferencing it is the caller's business (`unsafe`).
    #[inline]
    pub fn ptr(&self, r: Ref) -> *mut u8 {
        self.checked_ptr(r, 0, 0)
    }

    /// The address of `len` bytes at `offset` in block `r`, after checking that they lie
    /// inside the region's used part. The check runs in release builds too: a wrong
    /// `Ref` (a bug, or a crafted image that got past validation) stops the server with a
    /// panic instead of reading or writing outside the region.
    #[inline(always)]
    fn checked_ptr(&self, r: Ref, offset: usize, len: usize) -> *mut u8 {
        let start = r as usize * ALIGN_BYTES;
        let end = start.wrapping_add(offset).wrapping_add(len);
        let bump = self.header().bump_bytes as usize;
        if end > bump || end < start {
            out_of_bounds(r, offset, len, bump);
        }
        // SAFETY: start + offset + len <= bump_bytes <= reserved_bytes (the header's bump
        // never passes the reservation), so the pointer stays inside the mapping.
        unsafe { self.base.add(start + offset) }
    }

    #[inline]
    pub fn bytes(&self, r: Ref, offset: usize, len: usize) -> &[u8] {
        let p = self.checked_ptr(r, offset, len);
        // SAFETY: checked to lie inside the mapping; the region outlives `self`, and `&self`
        // excludes the executor's writes (only it holds `&mut Arena`).
        unsafe { std::slice::from_raw_parts(p, len) }
    }

    #[inline]
    pub fn bytes_mut(&mut self, r: Ref, offset: usize, len: usize) -> &mut [u8] {
        let p = self.checked_ptr(r, offset, len);
        self.wrote(r as usize * ALIGN_BYTES + offset, len);
        // SAFETY: as `bytes`; `&mut self` gives exclusive access.
        unsafe { std::slice::from_raw_parts_mut(p, len) }
    }

    /// Copies `len` bytes between (possibly overlapping) places in the arena.
    pub fn copy_within(&mut self, src: Ref, src_off: usize, dst: Ref, dst_off: usize, len: usize) {
        let from = self.checked_ptr(src, src_off, len);
        let to = self.checked_ptr(dst, dst_off, len);
        self.wrote(dst as usize * ALIGN_BYTES + dst_off, len);
        // SAFETY: both ranges checked to lie inside the mapping; `copy` allows overlap.
        unsafe { ptr::copy(from, to, len) };
    }

    #[inline]
    pub fn read_u32(&self, r: Ref, offset: usize) -> u32 {
        let p = self.checked_ptr(r, offset, 4);
        // SAFETY: checked to lie inside the mapping; any bit pattern is a u32.
        unsafe { ptr::read_unaligned(p as *const u32) }
    }
    #[inline]
    pub fn write_u32(&mut self, r: Ref, offset: usize, v: u32) {
        let p = self.checked_ptr(r, offset, 4);
        self.wrote(r as usize * ALIGN_BYTES + offset, 4);
        // SAFETY: as `read_u32`; `&mut self` gives exclusive access.
        unsafe { ptr::write_unaligned(p as *mut u32, v) }
    }
    #[inline]
    pub fn read_u64(&self, r: Ref, offset: usize) -> u64 {
        let p = self.checked_ptr(r, offset, 8);
        // SAFETY: as `read_u32`.
        unsafe { ptr::read_unaligned(p as *const u64) }
    }
    #[inline]
    pub fn write_u64(&mut self, r: Ref, offset: usize, v: u64) {
        let p = self.checked_ptr(r, offset, 8);
        self.wrote(r as usize * ALIGN_BYTES + offset, 8);
        // SAFETY: as `write_u32`.
        unsafe { ptr::write_unaligned(p as *mut u64, v) }
    }

    /// Reads a plain-old-data struct stored at `r`.
    #[inline]
    pub fn read<T: Pod>(&self, r: Ref) -> T {
        let p = self.checked_ptr(r, 0, std::mem::size_of::<T>());
        // SAFETY: checked to lie inside the mapping; T is Pod (any bit pattern valid).
        unsafe { ptr::read_unaligned(p as *const T) }
    }
    #[inline]
    pub fn write<T: Pod>(&mut self, r: Ref, v: &T) {
        let p = self.checked_ptr(r, 0, std::mem::size_of::<T>());
        self.wrote(r as usize * ALIGN_BYTES, std::mem::size_of::<T>());
        // SAFETY: as `read`; `&mut self` gives exclusive access.
        unsafe { ptr::write_unaligned(p as *mut T, *v) }
    }
}

#[cold]
#[inline(never)]
fn out_of_bounds(r: Ref, offset: usize, len: usize, bump: usize) -> ! {
    panic!(
        "arena access out of bounds: block {r} + {offset}, {len} bytes, used part ends at {bump}"
    )
}

impl Drop for Arena {
    fn drop(&mut self) {
        if let Some(m) = self.marks.take() {
            dirty::disarm(m.map());
        }
        if let Some(c) = self.capture.take() {
            cow::disarm(&c);
        }
        // SAFETY: we own the mapping and nothing borrows it past `self`.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.reserved_bytes) };
        // Whoever tracks the region's pages (a snapshot's write-protect registration, kept
        // between snapshots) learns that it went with the mapping.
        if let Some(hook) = UNMAP_HOOK.get() {
            hook(self.base as usize, self.reserved_bytes);
        }
    }
}

/// Called with `(base, len)` when an arena's mapping is unmapped (see [`on_unmap`]).
static UNMAP_HOOK: std::sync::OnceLock<fn(usize, usize)> = std::sync::OnceLock::new();

/// Registers the function told of every arena mapping that goes away. The arena knows
/// nothing of who tracks its pages; the tracker registers (once; later calls keep the
/// first function).
pub fn on_unmap(hook: fn(usize, usize)) {
    let _ = UNMAP_HOOK.set(hook);
}

/// Types that may be stored in the arena byte-for-byte: `repr(C)`, no pointers, every bit
/// pattern valid.
///
/// # Safety
/// Implementors must be `repr(C)` structs of integers (or arrays of them) only.
pub unsafe trait Pod: Copy {}
unsafe impl Pod for u32 {}
unsafe impl Pod for u64 {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_classes_cover_and_bound_waste() {
        let mut last = 0;
        for size in 1..200_000usize {
            let (idx, class) = size_class(size);
            assert!(class >= size, "class {class} < size {size}");
            assert!(class % 8 == 0);
            if size > 128 {
                assert!((class - size) * 8 <= size, "waste over 12.5% at {size}");
            }
            assert!(idx >= last);
            last = idx;
        }
        assert!(size_class(ARENA_MAX_BYTES - 1).0 < NUM_CLASSES);
        assert_eq!(size_class(128), (15, 128));
        assert_eq!(size_class(129).1, 144);
        assert_eq!(size_class(256).1, 256);
        assert_eq!(size_class(257).1, 288);
        // Every class of 32 KiB or more is a whole number of pages.
        for size in (LARGE_BLOCK_BYTES..(1 << 26)).step_by(777) {
            let (_, class) = size_class(size);
            assert_eq!(class % PAGE_BYTES, 0);
        }
    }

    #[test]
    fn a_full_arena_answers_err_and_changes_nothing() {
        let mut a = Arena::new(1 << 20, [1, 2]).unwrap();
        let mut blocks = 0;
        let err = loop {
            match a.try_alloc(64 * 1024) {
                Ok(_) => blocks += 1,
                Err(e) => break e,
            }
        };
        assert!(
            blocks > 0 && blocks < 16,
            "{blocks} blocks of 64 KiB in 1 MiB"
        );
        assert_eq!(err.reserved_bytes, 1 << 20);
        let (used, bump) = (a.used_bytes(), a.headroom_bytes());
        assert!(a.try_alloc(64 * 1024).is_err());
        assert!(!a.can_alloc(64 * 1024, 0));
        assert_eq!((a.used_bytes(), a.headroom_bytes()), (used, bump));
        // Small blocks still fit where a large one does not.
        assert!(a.can_alloc(16, 0));
        assert!(a.try_alloc_zeroed(16).is_ok());
    }

    #[test]
    fn alloc_free_reuses_memory() {
        let mut a = Arena::new(64 << 20, [1, 2]).unwrap();
        let base_used = a.used_bytes();
        let r1 = a.alloc(100);
        a.bytes_mut(r1, 0, 100).fill(7);
        assert_eq!(a.used_bytes(), base_used + 104);
        a.free(r1, 100);
        assert_eq!(a.used_bytes(), base_used);
        let r2 = a.alloc(97);
        assert_eq!(r1, r2, "same class reuses the freed block");
        let big = a.alloc_zeroed(100_000);
        assert_eq!(a.ptr(big) as usize % PAGE_BYTES, 0);
        a.bytes_mut(big, 0, 100_000).fill(9);
        a.free(big, 100_000);
        let big2 = a.alloc_zeroed(99_000);
        assert_eq!(big, big2);
        assert!(a.bytes(big2, 0, 99_000).iter().all(|&b| b == 0));
    }

    /// Pages of `[ptr, ptr + len)` resident in memory (mincore).
    fn resident_pages(ptr: *mut u8, len: usize) -> usize {
        let mut v = vec![0u8; len.div_ceil(PAGE_BYTES)];
        // SAFETY: `ptr` is page aligned and the range lies inside the arena's mapping;
        // `v` has one byte per page of it.
        let rc = unsafe { libc::mincore(ptr as *mut libc::c_void, len, v.as_mut_ptr()) };
        assert_eq!(rc, 0, "mincore: {}", std::io::Error::last_os_error());
        v.iter().filter(|&&b| b & 1 != 0).count()
    }

    /// A freed large block keeps its pages while the resident budget allows, so the next
    /// block of its class is reused without page faults; past the budget freed blocks
    /// give their pages back; and a zeroed allocation of a kept block is zeroed whole.
    #[test]
    fn freed_large_blocks_stay_resident_within_the_budget() {
        const MB10: usize = 10 << 20;
        let mut a = Arena::new(1 << 30, [1, 2]).unwrap();
        let n = (RESIDENT_FREE_BYTES as usize).div_ceil(MB10) + 2;
        let blocks: Vec<Ref> = (0..n).map(|_| a.alloc(MB10)).collect();
        for &b in &blocks {
            a.bytes_mut(b, 0, MB10).fill(0xAB);
        }
        let pages = MB10 / PAGE_BYTES;
        for &b in &blocks {
            a.free(b, MB10);
        }
        let kept: Vec<usize> = blocks
            .iter()
            .map(|&b| resident_pages(a.ptr(b), MB10))
            .collect();
        let whole = kept.iter().filter(|&&k| k >= pages).count();
        assert_eq!(
            whole,
            RESIDENT_FREE_BYTES as usize / size_class(MB10).1,
            "blocks kept resident: {kept:?}"
        );
        assert!(
            kept.iter().filter(|&&k| k <= 1).count() >= 2,
            "blocks past the budget give their pages back: {kept:?}"
        );
        // The free list hands back the last freed block first (given back, past the
        // budget); take until a kept one comes back: it is reused resident and, zeroed,
        // holds zeros only.
        let mut got = Vec::new();
        loop {
            let r = a.alloc_zeroed(MB10);
            got.push(r);
            let i = blocks.iter().position(|&b| b == r).unwrap();
            assert!(a.bytes(r, 0, MB10).iter().all(|&x| x == 0));
            if kept[i] >= pages {
                break;
            }
        }
        let r = a.alloc(MB10);
        let i = blocks.iter().position(|&b| b == r).unwrap();
        assert!(kept[i] >= pages);
        assert_eq!(resident_pages(a.ptr(r), MB10), pages);
        assert_eq!(a.bytes(r, PAGE_BYTES, 1), [0xAB]);
    }

    #[test]
    fn realloc_keeps_prefix() {
        let mut a = Arena::new(64 << 20, [1, 2]).unwrap();
        let r = a.alloc(10);
        a.bytes_mut(r, 0, 10).copy_from_slice(b"0123456789");
        let r = a.realloc(r, 10, 1000);
        assert_eq!(a.bytes(r, 0, 10), b"0123456789");
        let r = a.realloc(r, 1000, 4);
        assert_eq!(a.bytes(r, 0, 4), b"0123");
        a.free(r, 4);
        assert_eq!(a.live_blocks(), 0);
    }

    /// Every mutating accessor copies a page the cut still needs out *before* it writes:
    /// the side buffer holds each written page as it was at the cut.
    #[test]
    fn writes_after_a_cut_leave_the_cut_bytes_in_the_side_buffer() {
        let mut a = Arena::new(64 << 20, [1, 2]).unwrap();
        let big = a.alloc(3 * PAGE_BYTES);
        a.bytes_mut(big, 0, 3 * PAGE_BYTES).fill(7);
        let small = a.alloc(16);
        a.write_u64(small, 0, 11);
        a.set_keep_pages(true);
        let cap = a.capture().unwrap();
        let end = a.bump_bytes().next_multiple_of(PAGE_BYTES as u64);
        let mut cut_bytes = a.bytes(0, 0, a.bump_bytes() as usize).to_vec();
        cut_bytes.resize(end as usize, 0);
        let base = a.base_addr();
        assert!(cap.install(
            end,
            64 * PAGE_BYTES,
            // Reads the region as it is when the hook runs: a hook run after its write
            // would copy the new bytes.
            cow::region_copy(base, a.reserved_bytes()),
            false
        ));
        let page_of = |r: Ref, off: usize| {
            ((r as usize * ALIGN_BYTES + off) / PAGE_BYTES * PAGE_BYTES) as u64
        };
        a.write_u64(small, 8, 99);
        a.bytes_mut(big, PAGE_BYTES + 5, 1)[0] = 1;
        a.copy_within(small, 0, big, 2 * PAGE_BYTES + 100, 8);
        // A large block starts at a page boundary above the cut's end (no copy for it);
        // the header's page is copied.
        let moved = a.realloc(small, 16, 40_000);
        let cut = cap.cut().unwrap();
        for (r, off) in [
            (small, 8),
            (big, PAGE_BYTES + 5),
            (big, 2 * PAGE_BYTES + 100),
            (0, 0),
        ] {
            let pg = page_of(r, off);
            let copy = cut
                .side_page(pg)
                .unwrap_or_else(|| panic!("page {pg} not copied"));
            assert_eq!(
                copy,
                &cut_bytes[pg as usize..pg as usize + PAGE_BYTES],
                "page {pg} holds its cut bytes"
            );
        }
        assert!(moved as usize * ALIGN_BYTES >= end as usize);
        cut.finish();
        a.set_keep_pages(false);
    }
}
