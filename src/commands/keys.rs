//! Generic key commands (Redis's `db.c`, `expire.c`, `object.c` and `cluster.c`'s
//! DUMP/RESTORE): DEL, EXISTS, TYPE, KEYS, SCAN, RANDOMKEY, RENAME, COPY, MOVE, SWAPDB,
//! TOUCH, the expiry family, OBJECT, DUMP and RESTORE.
//!
//! Entry `Ref`s are invalidated by anything that may allocate or free in the keyspace
//! (a lazy expiry inside a lookup included), so handlers re-find an entry after such a call.

use super::notify::{notify, notify_db, NOTIFY_GENERIC};
use super::{
    CmdError, CmdResult, CommandSpec, Ctx, DENYOOM, FAST, LOADING, READONLY, STALE, WRITE,
};
use crate::arena::Ref;
use crate::keyspace::evict::{idle_ms, EvictionPolicy};
use crate::keyspace::{lfu_minutes, lru_clock, Kind, StrEnc, Ttl, LRU_CLOCK_MAX};
use crate::persistence::rdb_value::{self, Reader, Value};
use crate::util::{glob_match, parse_i64};

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new("del", -2, WRITE, "generic", del)
        .keys(1, -1, 1)
        .doc("Deletes one or more keys.", "1.0.0"),
    CommandSpec::new("unlink", -2, WRITE | FAST, "generic", del)
        .keys(1, -1, 1)
        .doc("Asynchronously deletes one or more keys.", "4.0.0"),
    CommandSpec::new("exists", -2, READONLY | FAST, "generic", exists)
        .keys(1, -1, 1)
        .doc("Determines whether one or more keys exist.", "1.0.0"),
    CommandSpec::new("type", 2, READONLY | FAST, "generic", type_cmd)
        .keys(1, 1, 1)
        .doc("Determines the type of value stored at a key.", "1.0.0"),
    CommandSpec::new("keys", 2, READONLY, "generic", keys)
        .acl(super::acl::KEYSPACE | super::acl::DANGEROUS)
        .doc("Returns all key names that match a pattern.", "1.0.0"),
    CommandSpec::new("scan", -2, READONLY, "generic", scan)
        .doc("Iterates over the key names in the database.", "2.8.0"),
    CommandSpec::new("randomkey", 1, READONLY, "generic", randomkey)
        .doc("Returns a random key name from the database.", "1.0.0"),
    CommandSpec::new("rename", 3, WRITE, "generic", rename)
        .keys(1, 2, 1)
        .doc("Renames a key and overwrites the destination.", "1.0.0"),
    CommandSpec::new("renamenx", 3, WRITE | FAST, "generic", renamenx)
        .keys(1, 2, 1)
        .doc("Renames a key only when the target key name doesn't exist.", "1.0.0"),
    CommandSpec::new("copy", -3, WRITE | DENYOOM, "generic", copy)
        .keys(1, 2, 1)
        .doc("Copies the value of a key to a new key.", "6.2.0"),
    CommandSpec::new("move", 3, WRITE | FAST, "generic", move_cmd)
        .keys(1, 1, 1)
        .doc("Moves a key to another database.", "1.0.0"),
    CommandSpec::new("swapdb", 3, WRITE | FAST, "server", swapdb)
        .acl(super::acl::KEYSPACE | super::acl::DANGEROUS)
        .doc("Swaps two Redis databases.", "4.0.0"),
    CommandSpec::new("touch", -2, READONLY | FAST, "generic", touch)
        .keys(1, -1, 1)
        .doc(
            "Returns the number of existing keys out of those specified after updating the time they were last accessed.",
            "3.2.1",
        ),
    CommandSpec::new("expire", -3, WRITE | FAST, "generic", expire)
        .keys(1, 1, 1)
        .doc("Sets the expiration time of a key in seconds.", "1.0.0"),
    CommandSpec::new("pexpire", -3, WRITE | FAST, "generic", pexpire)
        .keys(1, 1, 1)
        .doc("Sets the expiration time of a key in milliseconds.", "2.6.0"),
    CommandSpec::new("expireat", -3, WRITE | FAST, "generic", expireat)
        .keys(1, 1, 1)
        .doc("Sets the expiration time of a key to a Unix timestamp.", "1.2.0"),
    CommandSpec::new("pexpireat", -3, WRITE | FAST, "generic", pexpireat)
        .keys(1, 1, 1)
        .doc(
            "Sets the expiration time of a key to a Unix milliseconds timestamp.",
            "2.6.0",
        ),
    CommandSpec::new("ttl", 2, READONLY | FAST, "generic", ttl)
        .keys(1, 1, 1)
        .doc("Returns the expiration time in seconds of a key.", "1.0.0"),
    CommandSpec::new("pttl", 2, READONLY | FAST, "generic", pttl)
        .keys(1, 1, 1)
        .doc("Returns the expiration time in milliseconds of a key.", "2.6.0"),
    CommandSpec::new("expiretime", 2, READONLY | FAST, "generic", expiretime)
        .keys(1, 1, 1)
        .doc("Returns the expiration time of a key as a Unix timestamp.", "7.0.0"),
    CommandSpec::new("pexpiretime", 2, READONLY | FAST, "generic", pexpiretime)
        .keys(1, 1, 1)
        .doc(
            "Returns the expiration time of a key as a Unix milliseconds timestamp.",
            "7.0.0",
        ),
    CommandSpec::new("persist", 2, WRITE | FAST, "generic", persist)
        .keys(1, 1, 1)
        .doc("Removes the expiration time of a key.", "2.2.0"),
    CommandSpec::new("object", -2, 0, "generic", object_help)
        .acl(0)
        .doc("A container for object introspection commands.", "2.2.3")
        .subs(OBJECT_SUBS),
    CommandSpec::new("dump", 2, READONLY, "generic", dump)
        .keys(1, 1, 1)
        .doc(
            "Returns a serialized representation of the value stored at a key.",
            "2.6.0",
        ),
    CommandSpec::new("restore", -4, WRITE | DENYOOM, "generic", restore)
        .acl(super::acl::KEYSPACE | super::acl::DANGEROUS)
        .keys(1, 1, 1)
        .doc(
            "Creates a key from the serialized representation of a value.",
            "2.6.0",
        ),
];

static OBJECT_SUBS: &[CommandSpec] = &[
    CommandSpec::new("encoding", 3, READONLY, "generic", object_encoding)
        .keys(2, 2, 1)
        .doc("Returns the internal encoding of a Redis object.", "2.2.3"),
    CommandSpec::new("freq", 3, READONLY, "generic", object_freq)
        .keys(2, 2, 1)
        .doc(
            "Returns the logarithmic access frequency counter of a Redis object.",
            "4.0.0",
        ),
    CommandSpec::new("idletime", 3, READONLY, "generic", object_idletime)
        .keys(2, 2, 1)
        .doc(
            "Returns the time since the last access to a Redis object.",
            "2.2.3",
        ),
    CommandSpec::new("refcount", 3, READONLY, "generic", object_refcount)
        .keys(2, 2, 1)
        .doc("Returns the reference count of a value of a key.", "2.2.3"),
    CommandSpec::new("help", 2, LOADING | STALE, "generic", object_help).doc(
        "Returns helpful text about the different subcommands.",
        "6.2.0",
    ),
];

// ---- shared helpers -------------------------------------------------------------------

/// A read lookup that does not update the access time but counts a hit or miss, as
/// Redis's `lookupKeyReadWithFlags(.., LOOKUP_NOTOUCH)` (TTL, TYPE, EXISTS...); a miss
/// is a `keymiss` event.
fn lookup_notouch(ctx: &mut Ctx, key: &[u8]) -> Option<Ref> {
    let e = lookup_notouch_quiet(ctx, key);
    if e.is_none() {
        let db = ctx.client.db;
        ctx.srv
            .ks
            .record_event(crate::keyspace::events::KeyEventKind::KeyMiss, db, key);
    }
    e
}

/// The same without the `keymiss` event (OBJECT's lookup, `LOOKUP_NONOTIFY`).
fn lookup_notouch_quiet(ctx: &mut Ctx, key: &[u8]) -> Option<Ref> {
    let ks = &mut ctx.srv.ks;
    let e = ks.find(ctx.client.db, key, ctx.now_ms);
    if e.is_some() {
        ks.stats.hits += 1;
    } else {
        ks.stats.misses += 1;
    }
    e
}

/// Re-finds an entry that a previous lookup proved live, after a call that may have
/// moved it. Its absence would be a keyspace bug; it is reported, not a panic.
fn refind(ctx: &Ctx, db: usize, key: &[u8]) -> Result<Ref, CmdError> {
    ctx.srv.ks.find_raw(db, key).ok_or(CmdError::NoSuchKey)
}

/// Redis's `getIntFromObjectOrReply` without a custom message: a 32-bit integer.
fn parse_int_arg(arg: &[u8]) -> Result<i64, CmdError> {
    let v = parse_i64(arg).ok_or(CmdError::NotInteger)?;
    if v < i32::MIN as i64 || v > i32::MAX as i64 {
        return Err(CmdError::err(
            "value is out of range, value must between -2147483648 and 2147483647",
        ));
    }
    Ok(v)
}

/// A DB index argument: a 32-bit integer, then a valid index.
fn parse_db_arg(ctx: &Ctx, arg: &[u8]) -> Result<usize, CmdError> {
    let v = parse_int_arg(arg)?;
    if v < 0 || v as usize >= ctx.srv.ks.num_dbs() {
        return Err(CmdError::DbIndexOutOfRange);
    }
    Ok(v as usize)
}

// ---- DEL / EXISTS / TYPE / TOUCH --------------------------------------------------------

fn del(ctx: &mut Ctx) -> CmdResult {
    let db = ctx.client.db;
    let mut n = 0;
    for i in 1..ctx.args.len() {
        if ctx.srv.ks.delete(db, ctx.args.get(i), ctx.now_ms) {
            n += 1;
            notify(ctx, NOTIFY_GENERIC, "del", ctx.args.get(i));
        }
    }
    ctx.dirty(n as u64);
    ctx.out.int(n);
    Ok(())
}

fn exists(ctx: &mut Ctx) -> CmdResult {
    let mut n = 0;
    for i in 1..ctx.args.len() {
        if lookup_notouch(ctx, ctx.args.get(i)).is_some() {
            n += 1;
        }
    }
    ctx.out.int(n);
    Ok(())
}

fn type_cmd(ctx: &mut Ctx) -> CmdResult {
    match lookup_notouch(ctx, ctx.args.get(1)) {
        Some(e) => {
            let name = ctx.srv.ks.kind(e).type_name();
            ctx.out.simple(name);
        }
        None => ctx.out.simple("none"),
    }
    Ok(())
}

/// TOUCH: a plain read lookup per key, which is what updates the access time.
fn touch(ctx: &mut Ctx) -> CmdResult {
    let db = ctx.client.db;
    let mut n = 0;
    for i in 1..ctx.args.len() {
        if ctx
            .srv
            .ks
            .lookup_read(db, ctx.args.get(i), ctx.now_ms)
            .is_some()
        {
            n += 1;
        }
    }
    ctx.out.int(n);
    Ok(())
}

// ---- KEYS / SCAN / RANDOMKEY ------------------------------------------------------------

/// KEYS: one full pass over the db. Expired keys are skipped, not deleted (as Redis).
fn keys(ctx: &mut Ctx) -> CmdResult {
    let db = ctx.client.db;
    let pattern = ctx.args.get(1);
    let all = pattern == b"*";
    let now = ctx.now_ms;
    let ks = &ctx.srv.ks;
    let mut found: Vec<Ref> = Vec::new();
    let mut cursor = 0;
    loop {
        cursor = ks.scan(db, cursor, |e| {
            if (all || glob_match(pattern, ks.key(e), false)) && !ks.is_expired(e, now) {
                found.push(e);
            }
        });
        if cursor == 0 {
            break;
        }
    }
    ctx.out.array(found.len());
    for e in found {
        ctx.out.bulk(ks.key(e));
    }
    Ok(())
}

/// Redis's SCAN cursor parsing (`strtoul` in base 10): an optional sign (a negative
/// value wraps), digits, nothing else; no leading space; overflow is an error. The empty
/// string is cursor 0, as in Redis.
pub fn parse_scan_cursor(s: &[u8]) -> Option<u64> {
    if s.is_empty() {
        return Some(0);
    }
    let (neg, digits) = match s[0] {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() {
        return None;
    }
    let mut v: u64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((c - b'0') as u64)?;
    }
    Some(if neg { v.wrapping_neg() } else { v })
}

/// HSCAN / SSCAN / ZSCAN's cursor (argument 2), checked before the key is looked up.
pub fn key_scan_cursor(ctx: &Ctx) -> Result<u64, CmdError> {
    parse_scan_cursor(ctx.args.get(2)).ok_or_else(|| CmdError::err("invalid cursor"))
}

/// HSCAN / SSCAN / ZSCAN's `[MATCH pattern] [COUNT n]` (from argument 3), parsed after
/// the key was found, as Redis: (count, pattern; None for "*").
pub fn key_scan_opts<'a>(ctx: &Ctx<'a>) -> Result<(u64, Option<&'a [u8]>), CmdError> {
    let mut count: i64 = 10;
    let mut pattern: Option<&'a [u8]> = None;
    let mut i = 3;
    while i < ctx.args.len() {
        let has_value = i + 1 < ctx.args.len();
        if ctx.args.is(i, "COUNT") && has_value {
            count = ctx.args.i64(i + 1)?;
            if count < 1 {
                return Err(CmdError::Syntax);
            }
        } else if ctx.args.is(i, "MATCH") && has_value {
            let p = ctx.args.get(i + 1);
            pattern = if p == b"*" { None } else { Some(p) };
        } else {
            return Err(CmdError::Syntax);
        }
        i += 2;
    }
    Ok((count as u64, pattern))
}

/// The reply to a key SCAN of a missing key: cursor 0, no elements.
pub fn empty_scan_reply(ctx: &mut Ctx) {
    ctx.out.array(2);
    ctx.out.bulk(b"0");
    ctx.out.array(0);
}

fn scan(ctx: &mut Ctx) -> CmdResult {
    let mut cursor =
        parse_scan_cursor(ctx.args.get(1)).ok_or_else(|| CmdError::err("invalid cursor"))?;
    let mut count: i64 = 10;
    let mut pattern: Option<&[u8]> = None;
    let mut type_name: Option<&[u8]> = None;
    let mut i = 2;
    while i < ctx.args.len() {
        let has_value = i + 1 < ctx.args.len();
        if ctx.args.is(i, "COUNT") && has_value {
            count = ctx.args.i64(i + 1)?;
            if count < 1 {
                return Err(CmdError::Syntax);
            }
        } else if ctx.args.is(i, "MATCH") && has_value {
            let p = ctx.args.get(i + 1);
            // "*" matches everything: skip the matching work.
            pattern = if p == b"*" { None } else { Some(p) };
        } else if ctx.args.is(i, "TYPE") && has_value {
            type_name = Some(ctx.args.get(i + 1));
        } else {
            return Err(CmdError::Syntax);
        }
        i += 2;
    }

    // Step 1: visit buckets until COUNT keys were collected. COUNT is a work hint, and a
    // sparse table stops after ten times COUNT buckets so one call stays short.
    let db = ctx.client.db;
    let count = count as usize;
    let mut max_iterations = count.saturating_mul(10);
    let mut batch: Vec<Vec<u8>> = Vec::new();
    {
        let ks = &ctx.srv.ks;
        loop {
            cursor = ks.scan(db, cursor, |e| batch.push(ks.key(e).to_vec()));
            if cursor == 0 || max_iterations == 0 {
                break;
            }
            max_iterations -= 1;
            if batch.len() >= count {
                break;
            }
        }
    }

    // Step 2: filter by pattern, type and expiry (expired keys are deleted lazily here).
    let mut keep: Vec<Vec<u8>> = Vec::with_capacity(batch.len());
    for key in batch {
        if let Some(p) = pattern {
            if !glob_match(p, &key, false) {
                continue;
            }
        }
        let live = match type_name {
            Some(t) => match lookup_notouch(ctx, &key) {
                Some(e) => t.eq_ignore_ascii_case(ctx.srv.ks.kind(e).type_name().as_bytes()),
                None => false,
            },
            None => ctx.srv.ks.find(db, &key, ctx.now_ms).is_some(),
        };
        if live {
            keep.push(key);
        }
    }

    ctx.out.array(2);
    ctx.out.bulk(cursor.to_string().as_bytes());
    ctx.out.array(keep.len());
    for k in &keep {
        ctx.out.bulk(k);
    }
    Ok(())
}

/// Random draws before RANDOMKEY falls back to walking the table.
const RANDOMKEY_MAX_TRIES: usize = 100;
/// Buckets the fallback walk may visit.
const RANDOMKEY_MAX_SCAN_STEPS: usize = 1024;

/// RANDOMKEY: draws deleting expired keys as it meets them (as Redis). Redis loops until
/// it finds a live key; to keep one call bounded when most keys are expired, after a
/// number of draws it walks a bounded number of buckets instead.
fn randomkey(ctx: &mut Ctx) -> CmdResult {
    let db = ctx.client.db;
    let now = ctx.now_ms;
    let ks = &mut ctx.srv.ks;
    for _ in 0..RANDOMKEY_MAX_TRIES {
        let Some(e) = ks.random_entry(db) else {
            ctx.out.null();
            return Ok(());
        };
        if ks.is_expired(e, now) {
            ks.delete_and_propagate(db, e, crate::keyspace::events::KeyEventKind::Expired);
            ks.stats.expired_keys += 1;
            continue;
        }
        ctx.out.bulk(ks.key(e));
        return Ok(());
    }
    let mut cursor = 0;
    for _ in 0..RANDOMKEY_MAX_SCAN_STEPS {
        let mut live: Option<Vec<u8>> = None;
        let mut expired: Vec<Vec<u8>> = Vec::new();
        cursor = ks.scan(db, cursor, |e| {
            if ks.is_expired(e, now) {
                expired.push(ks.key(e).to_vec());
            } else if live.is_none() {
                live = Some(ks.key(e).to_vec());
            }
        });
        for k in &expired {
            // A lookup deletes the expired key and counts it.
            ks.find(db, k, now);
        }
        if let Some(k) = live {
            ctx.out.bulk(&k);
            return Ok(());
        }
        if cursor == 0 {
            break;
        }
    }
    ctx.out.null();
    Ok(())
}

// ---- RENAME / COPY / MOVE / SWAPDB ------------------------------------------------------

fn rename_generic(ctx: &mut Ctx, nx: bool) -> CmdResult {
    let db = ctx.client.db;
    let (src, dst) = (ctx.args.get(1), ctx.args.get(2));
    if ctx.srv.ks.lookup_write(db, src, ctx.now_ms).is_none() {
        return Err(CmdError::NoSuchKey);
    }
    if src == dst {
        if nx {
            ctx.out.int(0);
        } else {
            ctx.out.ok();
        }
        return Ok(());
    }
    if ctx.srv.ks.lookup_write(db, dst, ctx.now_ms).is_some() {
        if nx {
            ctx.out.int(0);
            return Ok(());
        }
        ctx.srv.ks.delete(db, dst, ctx.now_ms);
    }
    // The value moves with its TTL and access time (Redis moves the object itself).
    let e = refind(ctx, db, src)?;
    ctx.srv.ks.move_entry_to(db, e, db, dst);
    ctx.dirty(1);
    notify(ctx, NOTIFY_GENERIC, "rename_from", src);
    notify(ctx, NOTIFY_GENERIC, "rename_to", dst);
    if nx {
        ctx.out.int(1);
    } else {
        ctx.out.ok();
    }
    Ok(())
}

fn rename(ctx: &mut Ctx) -> CmdResult {
    rename_generic(ctx, false)
}

fn renamenx(ctx: &mut Ctx) -> CmdResult {
    rename_generic(ctx, true)
}

fn copy(ctx: &mut Ctx) -> CmdResult {
    let src_db = ctx.client.db;
    let mut dst_db = src_db;
    let mut replace = false;
    let mut i = 3;
    while i < ctx.args.len() {
        if ctx.args.is(i, "REPLACE") {
            replace = true;
        } else if ctx.args.is(i, "DB") && i + 1 < ctx.args.len() {
            dst_db = parse_db_arg(ctx, ctx.args.get(i + 1))?;
            i += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    let (src, dst) = (ctx.args.get(1), ctx.args.get(2));
    if src_db == dst_db && src == dst {
        return Err(CmdError::err("source and destination objects are the same"));
    }
    let Some(src_entry) = ctx.srv.ks.lookup_read(src_db, src, ctx.now_ms) else {
        ctx.out.int(0);
        return Ok(());
    };
    let copy_bytes = crate::commands::server::key_memory_usage(&ctx.srv.ks, src_db, src_entry);
    ctx.ensure_arena_room(copy_bytes)?;
    if ctx.srv.ks.lookup_write(dst_db, dst, ctx.now_ms).is_some() {
        if !replace {
            ctx.out.int(0);
            return Ok(());
        }
        ctx.srv.ks.delete(dst_db, dst, ctx.now_ms);
    }
    // A copy is a new object: same value, encoding and TTL, a fresh access time.
    let e = refind(ctx, src_db, src)?;
    let n = ctx.srv.ks.clone_entry_to(e, dst_db, dst, Ttl::Keep);
    let lru = ctx.srv.ks.initial_lru();
    ctx.srv.ks.set_lru(n, lru);
    ctx.dirty(1);
    notify_db(ctx, NOTIFY_GENERIC, "copy_to", dst, dst_db);
    ctx.out.int(1);
    Ok(())
}

fn move_cmd(ctx: &mut Ctx) -> CmdResult {
    let src_db = ctx.client.db;
    let dst_db = parse_db_arg(ctx, ctx.args.get(2))?;
    if src_db == dst_db {
        return Err(CmdError::err("source and destination objects are the same"));
    }
    let key = ctx.args.get(1);
    if ctx.srv.ks.lookup_write(src_db, key, ctx.now_ms).is_none()
        || ctx.srv.ks.lookup_write(dst_db, key, ctx.now_ms).is_some()
    {
        ctx.out.int(0);
        return Ok(());
    }
    let e = refind(ctx, src_db, key)?;
    ctx.srv.ks.move_entry_to(src_db, e, dst_db, key);
    ctx.dirty(1);
    notify_db(ctx, NOTIFY_GENERIC, "move_from", key, src_db);
    notify_db(ctx, NOTIFY_GENERIC, "move_to", key, dst_db);
    ctx.out.int(1);
    Ok(())
}

fn swapdb(ctx: &mut Ctx) -> CmdResult {
    let parse = |arg: &[u8], which: &str| {
        parse_i64(arg)
            .filter(|v| *v >= i32::MIN as i64 && *v <= i32::MAX as i64)
            .ok_or_else(|| CmdError::err(format!("invalid {which} DB index")))
    };
    let a = parse(ctx.args.get(1), "first")?;
    let b = parse(ctx.args.get(2), "second")?;
    let n = ctx.srv.ks.num_dbs() as i64;
    if a < 0 || a >= n || b < 0 || b >= n {
        return Err(CmdError::DbIndexOutOfRange);
    }
    // Clients keep their db index, so each now sees the other database's contents.
    ctx.srv.ks.swap_dbs(a as usize, b as usize);
    ctx.dirty(1);
    ctx.out.ok();
    Ok(())
}

// ---- expiry -----------------------------------------------------------------------------

const EXPIRE_NX: u8 = 1;
const EXPIRE_XX: u8 = 2;
const EXPIRE_GT: u8 = 4;
const EXPIRE_LT: u8 = 8;

/// The NX/XX/GT/LT options of the EXPIRE family, with Redis's compatibility rules.
fn parse_expire_flags(ctx: &Ctx) -> Result<u8, CmdError> {
    let mut flags = 0;
    for i in 3..ctx.args.len() {
        flags |= if ctx.args.is(i, "NX") {
            EXPIRE_NX
        } else if ctx.args.is(i, "XX") {
            EXPIRE_XX
        } else if ctx.args.is(i, "GT") {
            EXPIRE_GT
        } else if ctx.args.is(i, "LT") {
            EXPIRE_LT
        } else {
            return Err(CmdError::err(format!(
                "Unsupported option {}",
                ctx.args.str(i)
            )));
        };
    }
    if flags & EXPIRE_NX != 0 && flags & (EXPIRE_XX | EXPIRE_GT | EXPIRE_LT) != 0 {
        return Err(CmdError::err(
            "NX and XX, GT or LT options at the same time are not compatible",
        ));
    }
    if flags & EXPIRE_GT != 0 && flags & EXPIRE_LT != 0 {
        return Err(CmdError::err(
            "GT and LT options at the same time are not compatible",
        ));
    }
    Ok(flags)
}

/// EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT. `base_ms` is added to the (converted) argument:
/// the command time for the relative forms, 0 for the absolute ones.
fn expire_generic(ctx: &mut Ctx, base_ms: i64, seconds: bool) -> CmdResult {
    let flags = parse_expire_flags(ctx)?;
    let name = ctx.spec.name;
    let mut when = ctx.args.i64(2)?;
    // Negative times are allowed (they delete the key); only overflow is an error.
    if seconds {
        when = when
            .checked_mul(1000)
            .ok_or(CmdError::InvalidExpire(name))?;
    }
    let when = when
        .checked_add(base_ms)
        .ok_or(CmdError::InvalidExpire(name))?;
    let db = ctx.client.db;
    let key = ctx.args.get(1);
    let Some(e) = ctx.srv.ks.lookup_write(db, key, ctx.now_ms) else {
        ctx.out.int(0);
        return Ok(());
    };
    if flags != 0 {
        let current = ctx.srv.ks.expire_at(e);
        let refuse = (flags & EXPIRE_NX != 0 && current.is_some())
            || (flags & EXPIRE_XX != 0 && current.is_none())
            // No TTL counts as an infinite one: GT can never beat it, LT always does.
            || (flags & EXPIRE_GT != 0 && current.is_none_or(|c| when <= c))
            || (flags & EXPIRE_LT != 0 && current.is_some_and(|c| when >= c));
        if refuse {
            ctx.out.int(0);
            return Ok(());
        }
    }
    if when <= ctx.now_ms {
        // A time in the past deletes the key (and replicates as a DEL in Redis).
        ctx.srv.ks.delete_entry(db, e);
        notify(ctx, NOTIFY_GENERIC, "del", key);
    } else {
        ctx.srv.ks.set_expire(db, e, Some(when));
        ctx.dirty(1);
        // Redis replies before this event (it comes after the reply for the client
        // itself).
        ctx.out.int(1);
        notify(ctx, NOTIFY_GENERIC, "expire", key);
        return Ok(());
    }
    ctx.dirty(1);
    ctx.out.int(1);
    Ok(())
}

fn expire(ctx: &mut Ctx) -> CmdResult {
    expire_generic(ctx, ctx.now_ms, true)
}

fn pexpire(ctx: &mut Ctx) -> CmdResult {
    expire_generic(ctx, ctx.now_ms, false)
}

fn expireat(ctx: &mut Ctx) -> CmdResult {
    expire_generic(ctx, 0, true)
}

fn pexpireat(ctx: &mut Ctx) -> CmdResult {
    expire_generic(ctx, 0, false)
}

/// TTL, PTTL, EXPIRETIME, PEXPIRETIME: -2 for a missing key, -1 without a TTL; seconds
/// are rounded to the nearest second, as Redis.
fn ttl_generic(ctx: &mut Ctx, millis: bool, absolute: bool) -> CmdResult {
    let Some(e) = lookup_notouch(ctx, ctx.args.get(1)) else {
        ctx.out.int(-2);
        return Ok(());
    };
    let Some(at) = ctx.srv.ks.expire_at(e) else {
        ctx.out.int(-1);
        return Ok(());
    };
    let v = if absolute {
        at
    } else {
        at.saturating_sub(ctx.now_ms)
    }
    .max(0);
    ctx.out.int(if millis {
        v
    } else {
        v.saturating_add(500) / 1000
    });
    Ok(())
}

fn ttl(ctx: &mut Ctx) -> CmdResult {
    ttl_generic(ctx, false, false)
}

fn pttl(ctx: &mut Ctx) -> CmdResult {
    ttl_generic(ctx, true, false)
}

fn expiretime(ctx: &mut Ctx) -> CmdResult {
    ttl_generic(ctx, false, true)
}

fn pexpiretime(ctx: &mut Ctx) -> CmdResult {
    ttl_generic(ctx, true, true)
}

fn persist(ctx: &mut Ctx) -> CmdResult {
    let db = ctx.client.db;
    match ctx.srv.ks.lookup_write(db, ctx.args.get(1), ctx.now_ms) {
        Some(e) if ctx.srv.ks.has_expire(e) => {
            ctx.srv.ks.set_expire(db, e, None);
            ctx.dirty(1);
            notify(ctx, NOTIFY_GENERIC, "persist", ctx.args.get(1));
            ctx.out.int(1);
        }
        _ => ctx.out.int(0),
    }
    Ok(())
}

// ---- OBJECT -----------------------------------------------------------------------------

/// Redis shares the integer objects 0..9999 (OBJ_SHARED_INTEGERS) unless an LRU/LFU
/// maxmemory policy needs per-key access times.
const SHARED_INTEGERS: i64 = 10_000;
/// The reference count Redis reports for a shared object (OBJ_SHARED_REFCOUNT, INT_MAX).
const SHARED_REFCOUNT: i64 = i32::MAX as i64;

/// OBJECT's lookup: no touch; a missing key answers a null (not an error).
fn object_lookup(ctx: &mut Ctx) -> Option<Ref> {
    let e = lookup_notouch_quiet(ctx, ctx.args.get(2));
    if e.is_none() {
        ctx.out.null();
    }
    e
}

/// Redis 7.0's encoding name for an entry. Strings carry their own [`StrEnc`]; other
/// kinds keep Redis's OBJ_ENCODING_* number in the entry's encoding byte.
pub(crate) fn encoding_name(ks: &crate::keyspace::Keyspace, e: Ref) -> &'static str {
    match ks.kind(e) {
        Kind::String => ks.str_enc(e).name(),
        // A small set of strings is kept as a listpack (as Redis 7.2 does), where Redis
        // 7.0, the version cairn reports, has a hashtable: the name is 7.0's, so what a
        // client reads matches the version it was told (README, "Version").
        Kind::Set if ks.enc(e) == crate::collections::set::ENC_LISTPACK => "hashtable",
        _ => {
            const NAMES: [&str; 12] = [
                "raw",
                "int",
                "hashtable",
                "zipmap",
                "linkedlist",
                "ziplist",
                "intset",
                "skiplist",
                "embstr",
                "quicklist",
                "stream",
                "listpack",
            ];
            let enc = ks.enc(e) as usize;
            NAMES.get(enc).copied().unwrap_or("unknown")
        }
    }
}

fn object_encoding(ctx: &mut Ctx) -> CmdResult {
    if let Some(e) = object_lookup(ctx) {
        let name = encoding_name(&ctx.srv.ks, e);
        ctx.out.bulk_str(name);
    }
    Ok(())
}

fn object_refcount(ctx: &mut Ctx) -> CmdResult {
    let Some(e) = object_lookup(ctx) else {
        return Ok(());
    };
    let s = ctx.srv.config.settings();
    let sharing = s.maxmemory == 0
        || !matches!(
            s.maxmemory_policy,
            EvictionPolicy::AllKeysLru
                | EvictionPolicy::VolatileLru
                | EvictionPolicy::AllKeysLfu
                | EvictionPolicy::VolatileLfu
        );
    let ks = &ctx.srv.ks;
    let shared = sharing
        && ks.kind(e) == Kind::String
        && ks.str_enc(e) == StrEnc::Int
        && parse_i64(ks.value(e)).is_some_and(|v| (0..SHARED_INTEGERS).contains(&v));
    ctx.out.int(if shared { SHARED_REFCOUNT } else { 1 });
    Ok(())
}

fn object_idletime(ctx: &mut Ctx) -> CmdResult {
    let Some(e) = object_lookup(ctx) else {
        return Ok(());
    };
    if ctx.srv.ks.lfu {
        return Err(CmdError::err("An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust."));
    }
    let idle = idle_ms(ctx.srv.ks.lru(e)) / 1000;
    ctx.out.int(idle as i64);
    Ok(())
}

fn object_freq(ctx: &mut Ctx) -> CmdResult {
    let Some(e) = object_lookup(ctx) else {
        return Ok(());
    };
    if !ctx.srv.ks.lfu {
        return Err(CmdError::err("An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust."));
    }
    let f = ctx.srv.ks.lfu_decr_and_return(e);
    ctx.out.int(f as i64);
    Ok(())
}

fn object_help(ctx: &mut Ctx) -> CmdResult {
    let lines = [
        "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "ENCODING <key>",
        "    Return the kind of internal representation used in order to store the value",
        "    associated with a <key>.",
        "FREQ <key>",
        "    Return the access frequency index of the <key>. The returned integer is",
        "    proportional to the logarithm of the recent access frequency of the key.",
        "IDLETIME <key>",
        "    Return the idle time of the <key>, that is the approximated number of",
        "    seconds elapsed since the last access to the key.",
        "REFCOUNT <key>",
        "    Return the number of references of the value associated with the specified",
        "    <key>.",
        "HELP",
        "    Prints this help.",
    ];
    ctx.out.array(lines.len());
    for l in lines {
        ctx.out.simple(l);
    }
    Ok(())
}

// ---- DUMP / RESTORE ---------------------------------------------------------------------

/// The DUMP payload of an entry, or None for a kind the codec cannot encode yet.
fn dump_entry(ctx: &Ctx, e: Ref) -> Option<Vec<u8>> {
    dump_payload(&ctx.srv.ks, e)
}

/// The DUMP payload of entry `e` (what MIGRATE sends too).
pub(crate) fn dump_payload(ks: &crate::keyspace::Keyspace, e: Ref) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    crate::persistence::rdb_file::write_object(ks, e, &mut body).ok()?;
    Some(rdb_value::dump_payload(body))
}

fn dump(ctx: &mut Ctx) -> CmdResult {
    let db = ctx.client.db;
    let Some(e) = ctx.srv.ks.lookup_read(db, ctx.args.get(1), ctx.now_ms) else {
        ctx.out.null();
        return Ok(());
    };
    let payload = dump_entry(ctx, e)
        .ok_or_else(|| CmdError::err("DUMP of this value type is not supported yet"))?;
    ctx.out.bulk(&payload);
    Ok(())
}

fn restore(ctx: &mut Ctx) -> CmdResult {
    let mut replace = false;
    let mut absttl = false;
    let mut idle: Option<i64> = None;
    let mut freq: Option<i64> = None;
    let mut i = 4;
    while i < ctx.args.len() {
        let has_value = i + 1 < ctx.args.len();
        if ctx.args.is(i, "REPLACE") {
            replace = true;
        } else if ctx.args.is(i, "ABSTTL") {
            absttl = true;
        } else if ctx.args.is(i, "IDLETIME") && has_value && freq.is_none() {
            let v = ctx.args.i64(i + 1)?;
            if v < 0 {
                return Err(CmdError::err("Invalid IDLETIME value, must be >= 0"));
            }
            idle = Some(v);
            i += 1;
        } else if ctx.args.is(i, "FREQ") && has_value && idle.is_none() {
            let v = ctx.args.i64(i + 1)?;
            if !(0..=255).contains(&v) {
                return Err(CmdError::err("Invalid FREQ value, must be >= 0 and <= 255"));
            }
            freq = Some(v);
            i += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    let db = ctx.client.db;
    let key = ctx.args.get(1);
    if !replace && ctx.srv.ks.lookup_write(db, key, ctx.now_ms).is_some() {
        return Err(CmdError::raw("BUSYKEY Target key name already exists."));
    }
    let mut ttl = ctx.args.i64(2)?;
    if ttl < 0 {
        return Err(CmdError::err("Invalid TTL value, must be >= 0"));
    }
    let body = rdb_value::verify_dump_payload(ctx.args.get(3))
        .ok_or_else(|| CmdError::err("DUMP payload version or checksum are wrong"))?;
    // A restored string can be no longer than a client could have written.
    let max = (ctx.srv.config.settings().proto_max_bulk_len.max(0) as u64).min(u32::MAX as u64);
    let mut reader = Reader::new(body).with_max_string_len(max);
    let value = match rdb_value::read_object(&mut reader) {
        Ok(v) => v,
        Err(_) => return Err(CmdError::err("Bad data format")),
    };

    ctx.ensure_arena_room(value.arena_bytes_estimate())?;
    // As Redis: REPLACE deletes the key as it is, expired or not (no lookup, so no
    // `expired` event).
    let deleted = replace
        && match ctx.srv.ks.find_raw(db, key) {
            Some(e) => {
                ctx.srv.ks.delete_entry(db, e);
                true
            }
            None => false,
        };
    if ttl != 0 && !absttl {
        // Redis adds without an overflow check; a wrapped (negative) time is simply in
        // the past, so the key is not created — the same outcome, without UB.
        ttl = ttl.wrapping_add(ctx.now_ms);
    }
    if ttl != 0 && ttl <= ctx.now_ms {
        // Already expired: nothing is created; a replaced key is gone.
        if deleted {
            ctx.dirty(1);
            notify(ctx, NOTIFY_GENERIC, "del", key);
        }
        ctx.out.ok();
        return Ok(());
    }
    let expire = if ttl != 0 { Ttl::At(ttl) } else { Ttl::Clear };
    let e = match value {
        Value::String(s) => ctx
            .srv
            .ks
            .set_string(db, key, &s, StrEnc::for_value(&s), expire),
        Value::List(elems) => {
            crate::collections::list::create_from(&mut ctx.srv.ks, db, key, &elems, expire)
        }
        Value::Hash(pairs) => {
            let limits = crate::collections::hash::Limits::from_config(&ctx.srv.config);
            crate::collections::hash::create_from(&mut ctx.srv.ks, db, key, &pairs, expire, limits)
        }
        Value::ZSet(pairs) => {
            let limits = crate::collections::zset::Limits::from_config(&ctx.srv.config);
            // Never empty: the decoder refuses empty sorted sets.
            crate::collections::zset::create_from(&mut ctx.srv.ks, db, key, pairs, expire, limits)
                .ok_or_else(|| CmdError::err("Bad data format"))?
        }
        Value::Set(members) => {
            let limits = crate::collections::set::Limits::from_config(&ctx.srv.config);
            crate::collections::set::create_from(&mut ctx.srv.ks, db, key, &members, expire, limits)
        }
        Value::SetIntset(is) => {
            let limits = crate::collections::set::Limits::from_config(&ctx.srv.config);
            crate::collections::set::create_from_intset(
                &mut ctx.srv.ks,
                db,
                key,
                &is,
                expire,
                limits,
            )
        }
        Value::Stream(s) => {
            crate::collections::stream::create_from(&mut ctx.srv.ks, db, key, &s, expire)
        }
    };
    // Redis's objectSetLRUOrLFU: FREQ only matters under an LFU policy, IDLETIME only
    // under LRU.
    if ctx.srv.ks.lfu {
        if let Some(f) = freq {
            ctx.srv.ks.set_lru(e, (lfu_minutes() << 8) | f as u32);
        }
    } else if let Some(idle) = idle {
        // Redis scales seconds to clock ticks with a multiplication that wraps on absurd
        // inputs, adds the clock's period once on underflow, and stores the result in a
        // 24-bit field; the same arithmetic keeps OBJECT IDLETIME identical.
        let idle = idle.wrapping_mul(1000) / 1000;
        let clock = lru_clock() as i64;
        let mut at = clock.wrapping_sub(idle);
        if at < 0 {
            at = at.wrapping_add(LRU_CLOCK_MAX as i64);
        }
        let at = (at as u64 & 0xFF_FFFF) as i64;
        ctx.srv.ks.set_lru(e, at as u32);
    }
    ctx.dirty(1);
    notify(ctx, NOTIFY_GENERIC, "restore", key);
    ctx.out.ok();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::parse_scan_cursor;

    #[test]
    fn scan_cursor_parses_like_strtoul() {
        assert_eq!(parse_scan_cursor(b"0"), Some(0));
        assert_eq!(parse_scan_cursor(b""), Some(0));
        assert_eq!(parse_scan_cursor(b"007"), Some(7));
        assert_eq!(parse_scan_cursor(b"+5"), Some(5));
        assert_eq!(parse_scan_cursor(b"-0"), Some(0));
        assert_eq!(parse_scan_cursor(b"-1"), Some(u64::MAX));
        assert_eq!(parse_scan_cursor(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_scan_cursor(b"-18446744073709551615"), Some(1));
        for bad in [
            &b"18446744073709551616"[..],
            b"-18446744073709551616",
            b" 1",
            b"1 ",
            b"+",
            b"-",
            b"x",
            b"0x10",
        ] {
            assert_eq!(parse_scan_cursor(bad), None, "{bad:?}");
        }
    }
}
