//! The walk that checks an arena restored from a snapshot image before the server
//! serves from it (ARCHITECTURE.md, "An image is input, not memory").
//!
//! One pass over everything the server will touch, starting from the arena header's
//! roots: the free lists, the database table, every database's dict and TTL index, every
//! entry (kind, lengths, out-of-line string block) and every collection's nodes, the
//! graveyard of flushed databases, the value graveyard and the orphan list. Every block
//! reached is claimed once (`arena::validate::Claims`: inside the bump, not overlapping
//! any other), and the allocator's counters must equal what was found. After it, every
//! length, kind and reference the code follows is one it could have written itself.

use super::tiered::{ColdScan, ColdStub, COLD_STUB_BYTES, FLAG_COLD, TIER_FLAGS};
use super::ValueOps;
use super::{
    DbHeader, GraveNode, Kind, BIG_HDR, DB_HEADER_BYTES, ENTRY_HEADER_BYTES, FLAG_BIG, FLAG_EXPIRE,
    OFF_FLAGS, OFF_KIND, OFF_VAL_LEN, OFF_VIDX, ROOT_DBS, ROOT_GRAVEYARD, ROOT_NUM_DBS,
    ROOT_ORPHANS,
};
use crate::arena::dict::DictUse;
use crate::arena::validate::{Claims, Corrupt};
use crate::arena::{Arena, Ref, ALIGN_BYTES, NULL};

/// The most databases an image may record (`Keyspace::from_arena` applies the
/// configured limit afterwards).
const MAX_IMAGE_DBS: u64 = 1 << 20;

fn offset_of(r: Ref) -> u64 {
    r as u64 * ALIGN_BYTES as u64
}

/// A root slot that holds a reference.
fn root_ref(a: &Arena, slot: usize, what: &str) -> Result<Ref, Corrupt> {
    let v = a.root(slot);
    Ref::try_from(v).map_err(|_| Corrupt::new(format!("{what} root {v:#x} is not a reference"), 0))
}

/// Checks every structure of an arena restored from an image (see the module comment).
/// Also marks free large blocks "not zeroed" (see `Arena::validate_free_lists`), and
/// clears the tier bits other than "cold" (the running server's queue and write state,
/// meaningless after a restart). Returns the cold entries' stubs: the loader checks them
/// against the snapshot's companion file.
pub fn validate_image(a: &mut Arena, values: &ValueOps) -> Result<ColdScan, Corrupt> {
    let mut claims = Claims::new(a);
    a.validate_free_lists(&mut claims)?;
    let mut walk = Walk::default();
    validate_structures(a, values, &mut claims, &mut walk)?;
    for e in walk.clear_bits {
        a.bytes_mut(e, OFF_FLAGS, 1)[0] &= !(TIER_FLAGS & !FLAG_COLD);
    }
    Ok(walk.cold)
}

/// What the entry walk gathers besides its verdict.
#[derive(Default)]
struct Walk {
    cold: ColdScan,
    /// Entries with tier bits to clear once the walk is over.
    clear_bits: Vec<Ref>,
}

fn validate_structures(
    a: &Arena,
    values: &ValueOps,
    claims: &mut Claims,
    walk: &mut Walk,
) -> Result<(), Corrupt> {
    let num_dbs = a.root(ROOT_NUM_DBS);
    if num_dbs == 0 || num_dbs > MAX_IMAGE_DBS {
        return Err(Corrupt::new(
            format!("the image records {num_dbs} databases"),
            0,
        ));
    }
    let dbs = root_ref(a, ROOT_DBS, "database table")?;
    claims.claim(dbs, num_dbs * DB_HEADER_BYTES as u64, "database table")?;
    for db in 0..num_dbs as usize {
        let r = dbs + (db * DB_HEADER_BYTES / ALIGN_BYTES) as Ref;
        let h: DbHeader = a.read(r);
        validate_db(a, values, claims, walk, &h, DictUse::Live, offset_of(r))?;
    }

    let mut node = root_ref(a, ROOT_GRAVEYARD, "database graveyard")?;
    while node != NULL {
        let size = std::mem::size_of::<GraveNode>() as u64;
        claims.claim(node, size, "flushed database (graveyard node)")?;
        let g: GraveNode = a.read(node);
        let db_at = offset_of(node) + std::mem::offset_of!(GraveNode, db) as u64;
        validate_db(a, values, claims, walk, &g.db, DictUse::Detached, db_at)?;
        node = g.next;
    }

    let mut b = root_ref(a, ROOT_ORPHANS, "orphan list")?;
    while b != NULL {
        claims.peek(b, BIG_HDR as u64, "orphaned value block")?;
        let len = a.read_u32(b, 0) as u64;
        claims.claim(b, BIG_HDR as u64 + len, "orphaned value block")?;
        b = a.read_u32(b, 12);
    }

    (values.validate_graveyard)(a, claims)?;
    a.validate_counters(claims)
}

/// A database (live, or flushed and waiting in the graveyard): its TTL index's memory,
/// its dict and entries, and for a live one the TTL index's contents (exactly the
/// entries with a TTL, each at the slot it records).
fn validate_db(
    a: &Arena,
    values: &ValueOps,
    claims: &mut Claims,
    walk: &mut Walk,
    h: &DbHeader,
    usage: DictUse,
    at: u64,
) -> Result<(), Corrupt> {
    let volatile = h.volatile;
    let volatile_at = at + std::mem::offset_of!(DbHeader, volatile) as u64;
    volatile.validate_blocks(a, claims, volatile_at)?;
    let mut with_ttl = 0u64;
    h.dict.validate(
        a,
        claims,
        ENTRY_HEADER_BYTES as u32,
        usage,
        at,
        |a, claims, e| {
            validate_entry(a, values, claims, walk, usage, e)?;
            let flags = a.bytes(e, OFF_FLAGS, 1)[0];
            if usage == DictUse::Live && flags & FLAG_EXPIRE != 0 {
                with_ttl += 1;
                let slot = a.read_u32(e, OFF_VIDX) as u64;
                if slot >= volatile.len || volatile.get(a, slot as usize) != e {
                    return Err(Corrupt::at(
                        format!("key with a TTL is not at its TTL index slot {slot}"),
                        e,
                    ));
                }
            }
            Ok(())
        },
    )?;
    if usage == DictUse::Live && with_ttl != volatile.len {
        return Err(Corrupt::new(
            format!(
                "the TTL index holds {} keys, the database {with_ttl} keys with a TTL",
                volatile.len
            ),
            volatile_at,
        ));
    }
    Ok(())
}

/// One entry: a kind the code knows, flags it writes, key and value inside the entry's
/// block, an out-of-line string's block, a collection's structures.
fn validate_entry(
    a: &Arena,
    values: &ValueOps,
    claims: &mut Claims,
    walk: &mut Walk,
    usage: DictUse,
    e: Ref,
) -> Result<(), Corrupt> {
    claims.peek(e, ENTRY_HEADER_BYTES as u64, "key entry")?;
    let key_len = a.read_u32(e, 4) as u64;
    let val_len = a.read_u32(e, OFF_VAL_LEN) as u64;
    let kind_byte = a.bytes(e, OFF_KIND, 1)[0];
    let flags = a.bytes(e, OFF_FLAGS, 1)[0];
    let Some(kind) = Kind::decode(kind_byte) else {
        return Err(Corrupt::at(format!("entry kind byte {kind_byte}"), e));
    };
    if flags & !(FLAG_EXPIRE | FLAG_BIG | TIER_FLAGS) != 0 {
        return Err(Corrupt::at(format!("entry flags {flags:#04x}"), e));
    }
    if flags & TIER_FLAGS & !FLAG_COLD != 0 {
        walk.clear_bits.push(e);
    }
    let big = flags & FLAG_BIG != 0;
    let cold = flags & FLAG_COLD != 0;
    if cold && (big || kind == Kind::Stream || val_len != COLD_STUB_BYTES as u64) {
        return Err(Corrupt::at(
            format!(
                "cold {} entry of value length {val_len} (flags {flags:#04x})",
                kind.type_name()
            ),
            e,
        ));
    }
    if big && (kind != Kind::String || val_len != 4) {
        return Err(Corrupt::at(
            format!(
                "out-of-line value flag on a {} entry of value length {val_len}",
                kind.type_name()
            ),
            e,
        ));
    }
    let ttl_bytes = if flags & FLAG_EXPIRE != 0 { 8 } else { 0 };
    let size = ENTRY_HEADER_BYTES as u64 + key_len + val_len + ttl_bytes;
    claims.claim(e, size, "key entry")?;
    let value_off = ENTRY_HEADER_BYTES + key_len as usize;
    if cold {
        let stub = ColdStub::decode(a.bytes(e, value_off, COLD_STUB_BYTES));
        if !stub.well_formed(key_len as usize) {
            return Err(Corrupt::at(format!("cold entry's tier record {stub:?}"), e));
        }
        walk.cold.stubs.push(stub);
        if usage == DictUse::Live {
            walk.cold.live_entries += 1;
            walk.cold.live_bytes += stub.value_bytes as u64;
        }
        return Ok(());
    }
    if big {
        let b = a.read_u32(e, value_off);
        claims.peek(b, BIG_HDR as u64, "string value block")?;
        if a.read_u32(b, 4) != 0 {
            return Err(Corrupt::at("a key's value block is marked orphaned", b));
        }
        let len = a.read_u32(b, 0) as u64;
        return claims.claim(b, BIG_HDR as u64 + len, "string value block");
    }
    let value = a.bytes(e, value_off, val_len as usize);
    (values.validate)(a, claims, kind, value, offset_of(e) + value_off as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keyspace::{StrEnc, Ttl};

    #[test]
    fn a_keyspace_of_every_kind_validates() {
        let mut ks = crate::collections::new_keyspace(Arena::new(256 << 20, [3, 4]).unwrap(), 4);
        ks.set_string(0, b"s", b"v", StrEnc::Embstr, Ttl::Clear);
        ks.set_string(
            0,
            b"big",
            &[7u8; 10_000],
            StrEnc::Raw,
            Ttl::At(i64::MAX / 2),
        );
        ks.set_string(1, b"ttl", b"x", StrEnc::Embstr, Ttl::At(i64::MAX / 2));
        validate_image(&mut ks.arena, &crate::collections::VALUE_OPS).unwrap();
    }

    #[test]
    fn an_unknown_kind_byte_is_refused_not_decoded() {
        let mut ks = crate::collections::new_keyspace(Arena::new(256 << 20, [3, 4]).unwrap(), 1);
        let e = ks.set_string(0, b"k", b"v", StrEnc::Embstr, Ttl::Clear);
        ks.arena.bytes_mut(e, OFF_KIND, 1)[0] = 9;
        let err = validate_image(&mut ks.arena, &crate::collections::VALUE_OPS).unwrap_err();
        assert!(err.what.contains("kind byte 9"), "{err}");
        assert_eq!(err.offset, offset_of(e));
    }
}
