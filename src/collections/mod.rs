//! Collection values stored in the arena (see ARCHITECTURE.md, "Collections").
//!
//! A collection's entry value is either an inline listpack (small) or a small fixed header
//! holding `Ref`s to out-of-line arena structures (large). This module also owns freeing
//! and deep-copying those structures, which the keyspace calls whenever it drops or copies
//! an entry, and the "value graveyard" that frees big values in slices.

pub mod hash;
pub mod hll;
pub mod list;
pub mod listpack;
pub mod set;
pub mod stream;
pub mod stream_groups;
pub mod zset;

use crate::arena::validate::{Claims, Corrupt};
use crate::arena::{Arena, Ref, NULL};
use crate::keyspace::tiered::ColdStub;
use crate::keyspace::Kind;

pub use crate::keyspace::ROOT_VALUE_GRAVEYARD;

/// The value functions the keyspace calls (it sits below the collections).
pub static VALUE_OPS: crate::keyspace::ValueOps = crate::keyspace::ValueOps {
    release: release_value,
    clone: clone_value,
    lazyfree_step: lazyfree_values_step,
    validate: validate_value,
    validate_graveyard: validate_value_graveyard,
    single_block_is_valid,
    cold_part_count,
    cold_parts,
    warm_part,
    cool_part,
};

/// Cold parts of a value (cold quicklist nodes; 0 for everything else), from its header.
pub fn cold_part_count(kind: Kind, value: &[u8]) -> u32 {
    match kind {
        Kind::List => list::cold_node_count(value),
        _ => 0,
    }
}

/// The cold parts of a value, head first, with their records' places.
pub fn cold_parts(a: &Arena, kind: Kind, value: &[u8]) -> Vec<(Ref, ColdStub)> {
    match kind {
        Kind::List => list::cold_nodes(a, value),
        _ => vec![],
    }
}

/// Brings a cold part back into RAM (`list::node_make_warm`); `hdr` is the value's header.
pub fn warm_part(
    a: &mut Arena,
    kind: Kind,
    hdr: &mut [u8],
    part: Ref,
    bytes: &[u8],
) -> Result<Ref, String> {
    match kind {
        Kind::List => list::node_make_warm(a, hdr, part, bytes),
        _ => Err("the value has no cold parts".into()),
    }
}

/// Makes a part cold (`list::node_make_cold`); `hdr` is the value's header.
pub fn cool_part(
    a: &mut Arena,
    kind: Kind,
    hdr: &mut [u8],
    part: Ref,
    stub: ColdStub,
) -> Option<Ref> {
    match kind {
        Kind::List => list::node_make_cold(a, hdr, part, stub),
        _ => None,
    }
}

/// An empty keyspace of `num_dbs` databases in `arena`, with the collections' value functions.
pub fn new_keyspace(arena: Arena, num_dbs: usize) -> crate::keyspace::Keyspace {
    crate::keyspace::Keyspace::new(arena, num_dbs, &VALUE_OPS)
}

/// The keyspace of an arena restored from an image (`Keyspace::from_arena`).
pub fn keyspace_from_arena(
    arena: Arena,
    num_dbs: usize,
) -> Result<crate::keyspace::Keyspace, String> {
    crate::keyspace::Keyspace::from_arena(arena, num_dbs, &VALUE_OPS)
}

/// Checks an image's arena structure by structure (`keyspace::validate::validate_image`).
/// Returns what it found of tiered (cold) values.
pub fn validate_image(a: &mut Arena) -> Result<crate::keyspace::tiered::ColdScan, Corrupt> {
    crate::keyspace::validate::validate_image(a, &VALUE_OPS)
}

/// Values with more out-of-line blocks than this are freed in slices (Redis's
/// LAZYFREE_THRESHOLD is 64 allocations).
pub const LAZYFREE_THRESHOLD: u64 = 64;

/// Grave node: `[next u32][kind u8][pad 3][payload: the value's header bytes, 56 max]`.
const GRAVE_BYTES: usize = 64;

/// Frees what a value owns outside its entry (nothing for inline encodings). A big value
/// is detached to the value graveyard in O(1) and freed by [`lazyfree_values_step`].
/// Returns true if the value was sent to the graveyard.
pub fn release_value(a: &mut Arena, kind: Kind, value: &[u8], freed: &mut Vec<ColdStub>) -> bool {
    let big = match kind {
        Kind::List if list::is_quicklist(value) => list::ql_nodes(value) as u64,
        Kind::Hash if hash::is_ht(value) => hash::ht_len(value),
        Kind::ZSet if zset::is_sl(value) => zset::sl_len(value),
        Kind::Set if set::is_ht(value) => set::ht_len(value),
        Kind::Stream => stream::block_count(a, value),
        _ => return false,
    };
    {
        if big > LAZYFREE_THRESHOLD {
            let g = a.alloc(GRAVE_BYTES);
            let head = a.root(ROOT_VALUE_GRAVEYARD) as Ref;
            a.write_u32(g, 0, head);
            a.bytes_mut(g, 4, 4).copy_from_slice(&[kind as u8, 0, 0, 0]);
            let n = value.len().min(GRAVE_BYTES - 8);
            a.bytes_mut(g, 8, n).copy_from_slice(&value[..n]);
            a.set_root(ROOT_VALUE_GRAVEYARD, g as u64);
            return true;
        }
        match kind {
            Kind::List => list::ql_free_all(a, value, freed),
            Kind::ZSet => zset::sl_free_all(a, value),
            Kind::Set => set::ht_free_all(a, value),
            Kind::Stream => stream::free_all(a, value),
            _ => hash::ht_free_all(a, value),
        }
    }
    false
}

/// Whether a value is one contiguous block that owns nothing outside its entry, so its
/// bytes alone are the whole value (what SSD tiering writes as one blob): strings, and
/// collections in an inline encoding (listpack hashes, sets, sorted sets and lists;
/// intsets). Quicklists, hashtables, skiplists and streams own out-of-line blocks.
pub fn single_block(kind: Kind, value: &[u8]) -> bool {
    match kind {
        Kind::String => true,
        Kind::List => !value.is_empty() && !list::is_quicklist(value),
        Kind::Hash => !value.is_empty() && !hash::is_ht(value),
        Kind::ZSet => !value.is_empty() && !zset::is_sl(value),
        Kind::Set => !value.is_empty() && !set::is_ht(value),
        Kind::Stream => false,
    }
}

/// Whether `value` is a well-formed single-block value of `kind`, checked as the image
/// validator checks inline values. A value read back from the tier file is checked
/// before it goes into the arena: the page CRC catches damage, not bytes written with a
/// matching CRC, and the collection code trusts a listpack's or an intset's layout.
pub fn single_block_is_valid(kind: Kind, value: &[u8]) -> bool {
    match kind {
        Kind::String => true,
        Kind::List => list::inline_is_valid(value),
        Kind::Hash => hash::inline_is_valid(value),
        Kind::Set => set::inline_is_valid(value),
        Kind::ZSet => zset::inline_is_valid(value),
        Kind::Stream => false,
    }
}

/// Number of out-of-line blocks a value owns (for MEMORY USAGE and lazy-free decisions).
pub fn out_of_line_bytes(a: &Arena, kind: Kind, value: &[u8]) -> u64 {
    if kind == Kind::List && list::is_quicklist(value) {
        return list::ql_bytes(a, value);
    }
    if kind == Kind::Hash && hash::is_ht(value) {
        return hash::ht_bytes(a, value);
    }
    if kind == Kind::ZSet && zset::is_sl(value) {
        return zset::sl_bytes(a, value);
    }
    if kind == Kind::Set && set::is_ht(value) {
        return set::ht_bytes(a, value);
    }
    if kind == Kind::Stream {
        return stream::bytes(a, value);
    }
    0
}

/// Deep-copies a value's out-of-line structures: returns the value bytes for the copy
/// (COPY, and RENAME/MOVE through `clone_entry_to`).
pub fn clone_value(a: &mut Arena, kind: Kind, value: &[u8]) -> Vec<u8> {
    if kind == Kind::List && list::is_quicklist(value) {
        return list::ql_clone(a, value);
    }
    if kind == Kind::Hash && hash::is_ht(value) {
        return hash::ht_clone(a, value);
    }
    if kind == Kind::ZSet && zset::is_sl(value) {
        // Node levels only need to be random, not reproducible.
        let mut rng = crate::util::Rng::from_time();
        return zset::sl_clone(a, &mut rng, value);
    }
    if kind == Kind::Set && set::is_ht(value) {
        return set::ht_clone(a, value);
    }
    if kind == Kind::Stream {
        return stream::clone(a, value);
    }
    value.to_vec()
}

/// Frees up to `budget` blocks of values in the value graveyard. Returns
/// (blocks freed, values finished, work remains).
pub fn lazyfree_values_step(
    a: &mut Arena,
    budget: usize,
    cold: &mut Vec<ColdStub>,
) -> (u64, u64, bool) {
    let mut freed = 0u64;
    let mut finished = 0u64;
    loop {
        let g = a.root(ROOT_VALUE_GRAVEYARD) as Ref;
        if g == NULL {
            return (freed, finished, false);
        }
        if freed as usize >= budget {
            return (freed, finished, true);
        }
        let kind = a.bytes(g, 4, 1)[0];
        let mut payload = [0u8; GRAVE_BYTES - 8];
        payload.copy_from_slice(a.bytes(g, 8, GRAVE_BYTES - 8));
        let done = if kind == Kind::List as u8 {
            let (n, done) = list::ql_free_some(a, &mut payload, budget - freed as usize, cold);
            freed += n;
            done
        } else if kind == Kind::Hash as u8 {
            let (n, done) = hash::ht_free_some(a, &mut payload, budget - freed as usize);
            freed += n;
            done
        } else if kind == Kind::ZSet as u8 {
            let (n, done) = zset::sl_free_some(a, &mut payload, budget - freed as usize);
            freed += n;
            done
        } else if kind == Kind::Set as u8 {
            let (n, done) = set::ht_free_some(a, &mut payload, budget - freed as usize);
            freed += n;
            done
        } else if kind == Kind::Stream as u8 {
            let (n, done) = stream::free_some(a, &mut payload, budget - freed as usize);
            freed += n;
            done
        } else {
            true
        };
        if done {
            let next = a.read_u32(g, 0);
            a.set_root(ROOT_VALUE_GRAVEYARD, next as u64);
            a.free(g, GRAVE_BYTES);
            finished += 1;
        } else {
            a.bytes_mut(g, 8, GRAVE_BYTES - 8).copy_from_slice(&payload);
        }
    }
}

/// Checks a collection value of a key restored from a snapshot image (its inline bytes
/// `value`, lying at arena offset `at`) and claims its out-of-line blocks.
pub fn validate_value(
    a: &Arena,
    claims: &mut Claims,
    kind: Kind,
    value: &[u8],
    at: u64,
) -> Result<(), Corrupt> {
    match kind {
        Kind::String => Ok(()),
        Kind::List => list::validate(a, claims, value, true, at),
        Kind::Hash => hash::validate(a, claims, value, true, at),
        Kind::Set => set::validate(a, claims, value, true, at),
        Kind::ZSet => zset::validate(a, claims, value, true, at),
        Kind::Stream => stream::validate(a, claims, value, true, at),
    }
}

/// A table-encoded value's header in an image: exactly `header_bytes` for a key's value,
/// at least that for a graveyard node's copy (`live` false).
fn check_header_len(
    v: &[u8],
    live: bool,
    header_bytes: usize,
    what: &str,
    at: u64,
) -> Result<(), Corrupt> {
    if (live && v.len() != header_bytes) || v.len() < header_bytes {
        return Err(Corrupt::new(format!("{what} of {} bytes", v.len()), at));
    }
    Ok(())
}

/// Checks the value graveyard of an arena restored from a snapshot image: its nodes and
/// the (possibly half freed) structures they hold.
pub fn validate_value_graveyard(a: &Arena, claims: &mut Claims) -> Result<(), Corrupt> {
    let root = a.root(ROOT_VALUE_GRAVEYARD);
    if root > Ref::MAX as u64 {
        return Err(Corrupt::new(format!("value graveyard root {root:#x}"), 0));
    }
    let mut g = root as Ref;
    while g != NULL {
        claims.claim(g, GRAVE_BYTES as u64, "value graveyard node")?;
        let kind = a.bytes(g, 4, 1)[0];
        let payload = a.bytes(g, 8, GRAVE_BYTES - 8);
        let at = g as u64 * crate::arena::ALIGN_BYTES as u64;
        match Kind::decode(kind) {
            Some(Kind::List) => list::validate(a, claims, payload, false, at)?,
            Some(Kind::Hash) => hash::validate(a, claims, payload, false, at)?,
            Some(Kind::Set) => set::validate(a, claims, payload, false, at)?,
            Some(Kind::ZSet) => zset::validate(a, claims, payload, false, at)?,
            Some(Kind::Stream) => stream::validate(a, claims, payload, false, at)?,
            _ => {
                return Err(Corrupt::at(
                    format!("value graveyard node of kind {kind}"),
                    g,
                ))
            }
        }
        g = a.read_u32(g, 0);
    }
    Ok(())
}
