//! MEMORY PURGE and MEMORY MALLOC-STATS: what cairn's two allocators can do and say.
//! Keyspace memory is the arena's (its freed blocks of 32 KiB and more give their pages
//! back when freed, so there is nothing left to purge there); the Rust heap (client
//! buffers, replies, the Lua state) is glibc's malloc, which PURGE trims.

use super::super::{CmdResult, Ctx};
use std::fmt::Write as _;

/// `malloc_trim(0)`: glibc returns the free memory at the top of its heaps and the free
/// pages inside them. Redis answers OK the same way after jemalloc's purge.
pub(super) fn memory_purge(ctx: &mut Ctx) -> CmdResult {
    // SAFETY: malloc_trim only walks glibc's own heaps; no Rust object is touched.
    unsafe {
        libc::malloc_trim(0);
    }
    ctx.out.ok();
    Ok(())
}

/// A text report, as Redis's jemalloc statistics: the arena's counters and glibc's
/// `mallinfo2` for the heap. O(1): no free list is walked.
pub(super) fn memory_malloc_stats(ctx: &mut Ctx) -> CmdResult {
    let a = &ctx.srv.ks.arena;
    let (free_small, free_large) = a.free_list_bytes();
    let mut s = String::new();
    let _ = writeln!(s, "___ Begin cairn allocator statistics ___");
    let _ = writeln!(s, "Arena (keyspace memory):");
    let _ = writeln!(s, "  reserved_bytes: {}", a.reserved_bytes());
    let _ = writeln!(s, "  bump_bytes: {}", a.bump_bytes());
    let _ = writeln!(s, "  headroom_bytes: {}", a.headroom_bytes());
    let _ = writeln!(s, "  used_bytes: {}", a.used_bytes());
    let _ = writeln!(s, "  requested_bytes: {}", a.requested_bytes());
    let _ = writeln!(s, "  live_blocks: {}", a.live_blocks());
    let _ = writeln!(s, "  free_list_bytes_small: {free_small}");
    let _ = writeln!(s, "  free_list_bytes_large: {free_large}");
    // SAFETY: mallinfo2 only reads glibc's bookkeeping and returns it by value.
    let mi = unsafe { libc::mallinfo2() };
    let _ = writeln!(s, "Heap (glibc malloc):");
    let _ = writeln!(s, "  arena_bytes: {}", mi.arena);
    let _ = writeln!(s, "  mmap_regions: {}", mi.hblks);
    let _ = writeln!(s, "  mmap_bytes: {}", mi.hblkhd);
    let _ = writeln!(s, "  in_use_bytes: {}", mi.uordblks);
    let _ = writeln!(s, "  free_bytes: {}", mi.fordblks);
    let _ = writeln!(s, "  free_chunks: {}", mi.ordblks);
    let _ = writeln!(s, "  top_releasable_bytes: {}", mi.keepcost);
    let _ = writeln!(s, "--- End cairn allocator statistics ---");
    ctx.out.verbatim(s.as_bytes());
    Ok(())
}
