//! HyperLogLog commands (Redis's `hyperloglog.c`): PFADD, PFCOUNT, PFMERGE, PFDEBUG,
//! PFSELFTEST. An HLL is a string holding Redis's bytes (`collections::hll` owns the
//! format), so GET, DUMP/RESTORE and RDB files carry it unchanged.
//!
//! Writes go through a copy of the value only when its length may change (a sparse edit,
//! a promotion to dense); a dense PFADD raises its registers in place, and the copy of a
//! sparse value is bounded by `hll-sparse-max-bytes` unless a client stored a longer one
//! itself (Redis moves the same bytes in place). A refused write (-OOM) or a corrupt value
//! (-INVALIDOBJ) leaves the key as Redis would.

use super::notify::{notify, NOTIFY_STRING};
use super::MAY_REPLICATE;
use super::{CmdError, CmdResult, CommandSpec, Ctx, ADMIN, DENYOOM, FAST, READONLY, WRITE};
use crate::arena::Ref;
use crate::collections::hll::{self, Encoding, Writer, REGISTERS};
use crate::keyspace::{Kind, StrEnc, Ttl};

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new("pfadd", -2, WRITE | DENYOOM | FAST, "hyperloglog", pfadd)
        .keys(1, 1, 1)
        .doc(
            "Adds the specified elements to the specified HyperLogLog.",
            "2.8.9",
        ),
    CommandSpec::new(
        "pfcount",
        -2,
        READONLY | MAY_REPLICATE,
        "hyperloglog",
        pfcount,
    )
    .keys(1, -1, 1)
    .doc(
        "Return the approximated cardinality of the set(s) observed by the HyperLogLog at key(s).",
        "2.8.9",
    ),
    CommandSpec::new("pfmerge", -2, WRITE | DENYOOM, "hyperloglog", pfmerge)
        .keys(1, -1, 1)
        .doc("Merge N different HyperLogLogs into a single one.", "2.8.9"),
    CommandSpec::new(
        "pfdebug",
        3,
        WRITE | DENYOOM | ADMIN,
        "hyperloglog",
        pfdebug,
    )
    .keys(2, 2, 1)
    .doc(
        "Internal commands for debugging HyperLogLog values",
        "2.8.9",
    ),
    CommandSpec::new("pfselftest", 1, ADMIN, "hyperloglog", pfselftest).doc(
        "An internal command for testing HyperLogLog values",
        "2.8.9",
    ),
];

const ERR_NOT_HLL: &str = "WRONGTYPE Key is not a valid HyperLogLog string value.";
const ERR_CORRUPT: &str = "INVALIDOBJ Corrupted HLL object detected";

fn corrupt() -> CmdError {
    CmdError::raw(ERR_CORRUPT)
}

/// A looked-up key checked as Redis's isHLLObjectOrReply: a string (WRONGTYPE otherwise)
/// holding a valid HLL header (the HLL-specific WRONGTYPE text otherwise).
fn check_hll(ctx: &Ctx, e: Ref) -> Result<Encoding, CmdError> {
    if ctx.srv.ks.kind(e) != Kind::String {
        return Err(CmdError::WrongType);
    }
    hll::encoding_of(ctx.srv.ks.value(e)).ok_or_else(|| CmdError::raw(ERR_NOT_HLL))
}

fn sparse_max_bytes(ctx: &Ctx) -> u64 {
    ctx.srv.config.settings().hll_sparse_max_bytes
}

/// Writes `bytes` as entry `e`'s value (resized if needed), keeping its TTL; the value
/// becomes `raw`, as Redis's dbUnshareStringValue makes it. Returns the entry.
fn store(ctx: &mut Ctx, e: Ref, bytes: &[u8]) -> Ref {
    let db = ctx.db();
    let e = if ctx.srv.ks.value(e).len() != bytes.len() {
        ctx.srv.ks.resize_value(db, e, bytes.len())
    } else {
        e
    };
    ctx.srv.ks.value_mut(e).copy_from_slice(bytes);
    ctx.srv.ks.set_str_enc(e, StrEnc::Raw);
    e
}

/// Room for a value about to grow from `old` to `new` bytes (-OOM before any change).
fn room_for(ctx: &mut Ctx, old: usize, new: usize) -> CmdResult {
    if new > old {
        ctx.ensure_arena_room(new as u64)?;
    }
    Ok(())
}

fn pfadd(ctx: &mut Ctx) -> CmdResult {
    let db = ctx.db();
    let key = ctx.args.get(1);
    let max_bytes = sparse_max_bytes(ctx);
    let found = ctx.srv.ks.lookup_write(db, key, ctx.now_ms);
    let Some(e) = found else {
        // A new HLL always counts as an update, even with no elements.
        let mut w = Writer::new(&hll::new_sparse());
        let mut changes = 1;
        for i in 2..ctx.args.len() {
            // A fresh sparse value is well formed: no element can find it corrupt.
            if w.add(ctx.args.get(i), max_bytes) == Ok(true) {
                changes += 1;
            }
        }
        w.invalidate_cache();
        let bytes = w.into_bytes();
        ctx.ensure_arena_room(bytes.len() as u64)?;
        ctx.srv
            .ks
            .set_string(db, key, &bytes, StrEnc::Raw, Ttl::Clear);
        ctx.dirty(changes);
        notify(ctx, NOTIFY_STRING, "pfadd", key);
        ctx.out.int(1);
        return Ok(());
    };
    let enc = check_hll(ctx, e)?;
    if enc == Encoding::Dense {
        // In place: the length never changes.
        let hashes: Vec<(usize, u8)> = (2..ctx.args.len())
            .map(|i| hll::pat_len(ctx.args.get(i)))
            .collect();
        let v = ctx.srv.ks.value_mut(e);
        let regs = hll::dense_regs_mut(v);
        let updated = hashes
            .iter()
            .filter(|&&(idx, count)| hll::dense_raise(regs, idx, count))
            .count();
        if updated > 0 {
            hll::invalidate_cache(v);
        }
        ctx.srv.ks.set_str_enc(e, StrEnc::Raw);
        ctx.dirty(updated as u64);
        if updated > 0 {
            notify(ctx, NOTIFY_STRING, "pfadd", key);
        }
        ctx.out.int((updated > 0) as i64);
        return Ok(());
    }
    // Elements that raise no register (a repeated element, most often) leave the value as
    // it is: read in place, without the copy an edit needs. The value becomes `raw` as
    // Redis's dbUnshareStringValue makes it.
    let unchanged = (2..ctx.args.len()).all(|i| {
        let (index, count) = hll::pat_len(ctx.args.get(i));
        hll::sparse_register(ctx.srv.ks.value(e), index).is_some_and(|old| old >= count)
    });
    if unchanged {
        ctx.srv.ks.set_str_enc(e, StrEnc::Raw);
        ctx.out.int(0);
        return Ok(());
    }
    let old_len = ctx.srv.ks.value(e).len();
    let mut w = Writer::new(ctx.srv.ks.value(e));
    let mut updated = 0u64;
    let mut failed = false;
    for i in 2..ctx.args.len() {
        match w.add(ctx.args.get(i), max_bytes) {
            Ok(true) => updated += 1,
            Ok(false) => {}
            Err(hll::Corrupt) => {
                failed = true;
                break;
            }
        }
    }
    if updated > 0 && !failed {
        w.invalidate_cache();
    }
    // Redis edits in place: registers raised before a corrupt run was met stay raised.
    let bytes = w.into_bytes();
    room_for(ctx, old_len, bytes.len())?;
    store(ctx, e, &bytes);
    if failed {
        return Err(corrupt());
    }
    ctx.dirty(updated);
    if updated > 0 {
        notify(ctx, NOTIFY_STRING, "pfadd", key);
    }
    ctx.out.int((updated > 0) as i64);
    Ok(())
}

fn pfcount(ctx: &mut Ctx) -> CmdResult {
    let db = ctx.db();
    if ctx.args.len() > 2 {
        // The union's cardinality; nothing is written.
        let mut max = [0u8; REGISTERS];
        for i in 1..ctx.args.len() {
            let key = ctx.args.get(i);
            let Some(e) = ctx.srv.ks.lookup_read(db, key, ctx.now_ms) else {
                continue;
            };
            check_hll(ctx, e)?;
            hll::merge_into(&mut max, ctx.srv.ks.value(e)).map_err(|_| corrupt())?;
        }
        ctx.out.int(hll::count_raw(&max) as i64);
        return Ok(());
    }
    let key = ctx.args.get(1);
    let Some(e) = ctx.srv.ks.lookup_read(db, key, ctx.now_ms) else {
        ctx.out.int(0);
        return Ok(());
    };
    check_hll(ctx, e)?;
    ctx.srv.ks.set_str_enc(e, StrEnc::Raw);
    if let Some(card) = hll::cached_card(ctx.srv.ks.value(e)) {
        ctx.out.int(card as i64);
        return Ok(());
    }
    let card = hll::count(ctx.srv.ks.value(e)).map_err(|_| corrupt())?;
    // The cache is part of the string: refreshing it is a change Redis propagates. A
    // value a pending reply still references is copied on write; with no arena room for
    // that copy the count is answered and the cache left stale (a read is never -OOM).
    let len = ctx.srv.ks.value(e).len() as u64;
    if ctx
        .srv
        .arena_admits(ctx.srv.arena_reserve_bytes() / 2, len + len / 8)
    {
        hll::set_cached_card(ctx.srv.ks.value_mut(e), card);
        ctx.dirty(1);
    }
    ctx.out.int(card as i64);
    Ok(())
}

fn pfmerge(ctx: &mut Ctx) -> CmdResult {
    let db = ctx.db();
    let mut max = [0u8; REGISTERS];
    let mut use_dense = false;
    // The destination is the first source too, as in Redis.
    for i in 1..ctx.args.len() {
        let key = ctx.args.get(i);
        let Some(e) = ctx.srv.ks.lookup_read(db, key, ctx.now_ms) else {
            continue;
        };
        if check_hll(ctx, e)? == Encoding::Dense {
            use_dense = true;
        }
        hll::merge_into(&mut max, ctx.srv.ks.value(e)).map_err(|_| corrupt())?;
    }
    let dest = ctx.args.get(1);
    let found = ctx.srv.ks.lookup_write(db, dest, ctx.now_ms);
    let (old_len, mut w) = match found {
        Some(e) => (ctx.srv.ks.value(e).len(), Writer::new(ctx.srv.ks.value(e))),
        None => (0, Writer::new(&hll::new_sparse())),
    };
    if use_dense {
        w.to_dense().map_err(|_| corrupt())?;
    }
    let max_bytes = sparse_max_bytes(ctx);
    for (i, &m) in max.iter().enumerate() {
        if m != 0 {
            // Every source was walked whole above, the destination included.
            let _ = w.raise(i, m, max_bytes);
        }
    }
    w.invalidate_cache();
    let bytes = w.into_bytes();
    room_for(ctx, old_len, bytes.len())?;
    match found {
        Some(e) => {
            store(ctx, e, &bytes);
        }
        None => {
            ctx.srv
                .ks
                .set_string(db, dest, &bytes, StrEnc::Raw, Ttl::Clear);
        }
    }
    ctx.dirty(1);
    // Redis names a merge `pfadd` too: it adds the sources' elements.
    notify(ctx, NOTIFY_STRING, "pfadd", dest);
    ctx.out.ok();
    Ok(())
}

fn pfdebug(ctx: &mut Ctx) -> CmdResult {
    let db = ctx.db();
    let key = ctx.args.get(2);
    let Some(e) = ctx.srv.ks.lookup_write(db, key, ctx.now_ms) else {
        return Err(CmdError::err("The specified key does not exist"));
    };
    let enc = check_hll(ctx, e)?;
    ctx.srv.ks.set_str_enc(e, StrEnc::Raw);
    let sub = ctx.args.get(1);
    if sub.eq_ignore_ascii_case(b"getreg") || sub.eq_ignore_ascii_case(b"todense") {
        let mut e = e;
        let converted = enc == Encoding::Sparse;
        if converted {
            let dense = hll::sparse_to_dense(ctx.srv.ks.value(e)).map_err(|_| corrupt())?;
            let old_len = ctx.srv.ks.value(e).len();
            room_for(ctx, old_len, dense.len())?;
            e = store(ctx, e, &dense);
            // The encoding change is propagated.
            ctx.dirty(1);
        }
        if sub.eq_ignore_ascii_case(b"todense") {
            ctx.out.int(converted as i64);
            return Ok(());
        }
        let v = ctx.srv.ks.value(e);
        let regs = &v[hll::HDR_BYTES..];
        ctx.out.array(REGISTERS);
        for i in 0..REGISTERS {
            ctx.out.int(hll::dense_get(regs, i) as i64);
        }
        return Ok(());
    }
    if sub.eq_ignore_ascii_case(b"decode") {
        if enc != Encoding::Sparse {
            return Err(CmdError::err("HLL encoding is not sparse"));
        }
        let text = hll::decode_sparse(ctx.srv.ks.value(e));
        ctx.out.bulk(text.as_bytes());
        return Ok(());
    }
    if sub.eq_ignore_ascii_case(b"encoding") {
        ctx.out.simple(match enc {
            Encoding::Dense => "dense",
            Encoding::Sparse => "sparse",
        });
        return Ok(());
    }
    Err(CmdError::err(format!(
        "Unknown PFDEBUG subcommand '{}'",
        String::from_utf8_lossy(sub)
    )))
}

fn pfselftest(ctx: &mut Ctx) -> CmdResult {
    let mut rng = crate::util::Rng::from_time();
    hll::selftest(&mut rng, sparse_max_bytes(ctx)).map_err(CmdError::err)?;
    ctx.out.ok();
    Ok(())
}
