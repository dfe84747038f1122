//! Set commands (Redis's `t_set.c`), over the arena sets of `crate::collections::set`.

use super::notify::{notify, NOTIFY_GENERIC, NOTIFY_SET};
use super::{CmdError, CmdResult, CommandSpec, Ctx, DENYOOM, FAST, READONLY, WRITE};
use crate::arena::Ref;
use crate::collections::set::{self, Limits};
use crate::commands::lists::reply_val;
use crate::keyspace::{Kind, Ttl};
use crate::util::{glob_match, parse_i64};

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new("sadd", -3, WRITE | DENYOOM | FAST, "set", sadd).keys(1, 1, 1).doc("Adds one or more members to a set. Creates the key if it doesn't exist.", "1.0.0"),
    CommandSpec::new("srem", -3, WRITE | FAST, "set", srem).keys(1, 1, 1).doc("Removes one or more members from a set. Deletes the set if the last member was removed.", "1.0.0"),
    CommandSpec::new("smembers", 2, READONLY, "set", smembers).keys(1, 1, 1).doc("Returns all members of a set.", "1.0.0"),
    CommandSpec::new("sismember", 3, READONLY | FAST, "set", sismember).keys(1, 1, 1).doc("Determines whether a member belongs to a set.", "1.0.0"),
    CommandSpec::new("smismember", -3, READONLY | FAST, "set", smismember).keys(1, 1, 1).doc("Determines whether multiple members belong to a set.", "6.2.0"),
    CommandSpec::new("scard", 2, READONLY | FAST, "set", scard).keys(1, 1, 1).doc("Returns the number of members in a set.", "1.0.0"),
    CommandSpec::new("spop", -2, WRITE | FAST, "set", spop).keys(1, 1, 1).doc("Returns one or more random members from a set after removing them. Deletes the set if the last member was popped.", "1.0.0"),
    CommandSpec::new("srandmember", -2, READONLY, "set", srandmember).keys(1, 1, 1).doc("Get one or multiple random members from a set", "1.0.0"),
    CommandSpec::new("smove", 4, WRITE | FAST, "set", smove).keys(1, 2, 1).doc("Moves a member from one set to another.", "1.0.0"),
    CommandSpec::new("sinter", -2, READONLY, "set", sinter).keys(1, -1, 1).doc("Returns the intersect of multiple sets.", "1.0.0"),
    CommandSpec::new("sintercard", -3, READONLY, "set", sintercard).doc("Returns the number of members of the intersect of multiple sets.", "7.0.0"),
    CommandSpec::new("sinterstore", -3, WRITE | DENYOOM, "set", sinterstore).keys(1, -1, 1).doc("Stores the intersect of multiple sets in a key.", "1.0.0"),
    CommandSpec::new("sunion", -2, READONLY, "set", sunion).keys(1, -1, 1).doc("Returns the union of multiple sets.", "1.0.0"),
    CommandSpec::new("sunionstore", -3, WRITE | DENYOOM, "set", sunionstore).keys(1, -1, 1).doc("Stores the union of multiple sets in a key.", "1.0.0"),
    CommandSpec::new("sdiff", -2, READONLY, "set", sdiff).keys(1, -1, 1).doc("Returns the difference of multiple sets.", "1.0.0"),
    CommandSpec::new("sdiffstore", -3, WRITE | DENYOOM, "set", sdiffstore).keys(1, -1, 1).doc("Stores the difference of multiple sets in a key.", "1.0.0"),
    CommandSpec::new("sscan", -3, READONLY, "set", sscan).keys(1, 1, 1).doc("Iterates over members of a set.", "2.8.0"),
];

/// SPOP logs its popped members as SREM commands of at most this many (Redis's batch).
const SPOP_LOG_BATCH: usize = 1024;

fn check(ctx: &Ctx, e: Option<Ref>) -> Result<Option<Ref>, CmdError> {
    super::of_kind(ctx, e, Kind::Set)
}
fn read_set(ctx: &mut Ctx, key: &[u8]) -> Result<Option<Ref>, CmdError> {
    let e = ctx.srv.ks.lookup_read(ctx.client.db, key, ctx.now_ms);
    check(ctx, e)
}
fn write_set(ctx: &mut Ctx, key: &[u8]) -> Result<Option<Ref>, CmdError> {
    let e = ctx.srv.ks.lookup_write(ctx.client.db, key, ctx.now_ms);
    check(ctx, e)
}
fn limits(ctx: &Ctx) -> Limits {
    Limits::from_settings(ctx.srv.config.settings())
}

fn sadd(ctx: &mut Ctx) -> CmdResult {
    let key = ctx.args.get(1);
    let db = ctx.db();
    let lim = limits(ctx);
    let mut e = match write_set(ctx, key)? {
        Some(e) => e,
        None => {
            let hint = (ctx.args.len() - 2) as u64;
            set::create(
                &mut ctx.srv.ks,
                db,
                key,
                ctx.args.get(2),
                hint,
                lim,
                Ttl::Clear,
            )
        }
    };
    let mut added = 0;
    for i in 2..ctx.args.len() {
        let (ne, a) = set::add(&mut ctx.srv.ks, db, e, ctx.args.get(i), lim);
        e = ne;
        added += a as u64;
    }
    ctx.dirty(added);
    if added > 0 {
        notify(ctx, NOTIFY_SET, "sadd", key);
    }
    ctx.out.int(added as i64);
    Ok(())
}

fn srem(ctx: &mut Ctx) -> CmdResult {
    let key = ctx.args.get(1);
    let found = write_set(ctx, key)?;
    super::remove_members(
        ctx,
        (super::notify::NOTIFY_SET, "srem"),
        found,
        set::remove,
        set::len,
    )
}

fn smembers(ctx: &mut Ctx) -> CmdResult {
    let key = ctx.args.get(1);
    let Some(e) = read_set(ctx, key)? else {
        ctx.out.set(0);
        return Ok(());
    };
    let ks = &ctx.srv.ks;
    ctx.out.set(set::len(ks, e) as usize);
    let out = &mut ctx.out;
    set::for_each(ks, e, |m| reply_val(out, m));
    Ok(())
}

fn sismember(ctx: &mut Ctx) -> CmdResult {
    let key = ctx.args.get(1);
    let found = match read_set(ctx, key)? {
        Some(e) => set::contains(&ctx.srv.ks, e, ctx.args.get(2)),
        None => false,
    };
    ctx.out.int(found as i64);
    Ok(())
}

fn smismember(ctx: &mut Ctx) -> CmdResult {
    let key = ctx.args.get(1);
    let e = read_set(ctx, key)?;
    ctx.out.array(ctx.args.len() - 2);
    for i in 2..ctx.args.len() {
        let found = e.is_some_and(|e| set::contains(&ctx.srv.ks, e, ctx.args.get(i)));
        ctx.out.int(found as i64);
    }
    Ok(())
}

fn scard(ctx: &mut Ctx) -> CmdResult {
    let key = ctx.args.get(1);
    let n = match read_set(ctx, key)? {
        Some(e) => set::len(&ctx.srv.ks, e),
        None => 0,
    };
    ctx.out.int(n as i64);
    Ok(())
}

/// Records what SPOP logs: SREMs of the popped members (or a DEL when the whole set
/// went), since replaying SPOP would pick other members.
fn log_popped(ctx: &mut Ctx, key: &[u8], popped: &[Vec<u8>], whole: bool) {
    if !ctx.srv.aof.propagating() || ctx.srv.loading {
        return;
    }
    if whole {
        ctx.srv
            .aof
            .command_forms
            .push(vec![b"DEL".to_vec(), key.to_vec()]);
        return;
    }
    for chunk in popped.chunks(SPOP_LOG_BATCH) {
        let mut v = Vec::with_capacity(chunk.len() + 2);
        v.push(b"SREM".to_vec());
        v.push(key.to_vec());
        v.extend(chunk.iter().cloned());
        ctx.srv.aof.command_forms.push(v);
    }
}

fn spop(ctx: &mut Ctx) -> CmdResult {
    let key = ctx.args.get(1);
    let db = ctx.db();
    match ctx.args.len() {
        2 => {
            let Some(e) = write_set(ctx, key)? else {
                ctx.out.null();
                return Ok(());
            };
            let (e, m) = set::pop_random(&mut ctx.srv.ks, db, e);
            let Some(m) = m else {
                ctx.out.null();
                return Ok(());
            };
            notify(ctx, NOTIFY_SET, "spop", key);
            ctx.out.bulk(&m);
            if set::len(&ctx.srv.ks, e) == 0 {
                ctx.srv.ks.delete_entry(db, e);
                notify(ctx, NOTIFY_GENERIC, "del", key);
            }
            log_popped(ctx, key, std::slice::from_ref(&m), false);
            ctx.dirty(1);
            Ok(())
        }
        3 => {
            let count = match parse_i64(ctx.args.get(2)) {
                Some(c) if c >= 0 => c as u64,
                _ => return Err(CmdError::err("value is out of range, must be positive")),
            };
            let Some(mut e) = write_set(ctx, key)? else {
                ctx.out.set(0);
                return Ok(());
            };
            if count == 0 {
                ctx.out.set(0);
                return Ok(());
            }
            let size = set::len(&ctx.srv.ks, e);
            notify(ctx, NOTIFY_SET, "spop", key);
            if count >= size {
                // The whole set: reply with it and delete the key.
                let ks = &ctx.srv.ks;
                ctx.out.set(size as usize);
                let out = &mut ctx.out;
                set::for_each(ks, e, |m| reply_val(out, m));
                ctx.srv.ks.delete_entry(db, e);
                notify(ctx, NOTIFY_GENERIC, "del", key);
                log_popped(ctx, key, &[], true);
                ctx.dirty(size);
                return Ok(());
            }
            let mut popped = Vec::with_capacity(count as usize);
            for _ in 0..count {
                let (ne, m) = set::pop_random(&mut ctx.srv.ks, db, e);
                e = ne;
                match m {
                    Some(m) => popped.push(m),
                    None => break,
                }
            }
            ctx.out.set(popped.len());
            for m in &popped {
                ctx.out.bulk(m);
            }
            log_popped(ctx, key, &popped, false);
            ctx.dirty(popped.len() as u64);
            Ok(())
        }
        _ => Err(CmdError::Syntax),
    }
}

fn srandmember(ctx: &mut Ctx) -> CmdResult {
    let key = ctx.args.get(1);
    match ctx.args.len() {
        2 => {}
        3 => return srandmember_count(ctx),
        _ => return Err(CmdError::Syntax),
    }
    let Some(e) = read_set(ctx, key)? else {
        ctx.out.null();
        return Ok(());
    };
    match set::random(&mut ctx.srv.ks, e) {
        Some(m) => ctx.out.bulk(&m),
        None => ctx.out.null(),
    }
    Ok(())
}

fn srandmember_count(ctx: &mut Ctx) -> CmdResult {
    let key = ctx.args.get(1);
    let l = match parse_i64(ctx.args.get(2)) {
        None => return Err(CmdError::NotInteger),
        Some(i64::MIN) => {
            return Err(CmdError::err(
                "value is out of range, value must between -9223372036854775807 and 9223372036854775807",
            ))
        }
        Some(l) => l,
    };
    let Some(e) = read_set(ctx, key)? else {
        ctx.out.array(0);
        return Ok(());
    };
    if l == 0 {
        ctx.out.array(0);
        return Ok(());
    }
    if l < 0 {
        // Repeats allowed: every pick independent.
        let n = l.unsigned_abs();
        if n > super::MAX_RANDOM_REPEATS {
            return Err(CmdError::err("value is out of range"));
        }
        ctx.out.array(n as usize);
        for _ in 0..n {
            if let Some(m) = set::random(&mut ctx.srv.ks, e) {
                ctx.out.bulk(&m);
            }
        }
        return Ok(());
    }
    let want = l as u64;
    let size = set::len(&ctx.srv.ks, e);
    if want >= size {
        let ks = &ctx.srv.ks;
        ctx.out.array(size as usize);
        let out = &mut ctx.out;
        set::for_each(ks, e, |m| reply_val(out, m));
        return Ok(());
    }
    if want.saturating_mul(3) <= size {
        // Few members out of many (Redis's case 4): sample until enough distinct ones,
        // without copying the set.
        let mut seen = std::collections::HashSet::new();
        let mut picked = Vec::with_capacity(want as usize);
        while (picked.len() as u64) < want {
            let Some(m) = set::random(&mut ctx.srv.ks, e) else {
                break;
            };
            if seen.insert(m.clone()) {
                picked.push(m);
            }
        }
        ctx.out.array(picked.len());
        for m in &picked {
            ctx.out.bulk(m);
        }
        return Ok(());
    }
    // Many of them: a partial Fisher-Yates shuffle of a copy.
    let mut all = set::members(&ctx.srv.ks, e);
    let n = want as usize;
    for i in 0..n {
        let j = i + ctx.srv.ks.rng.below((all.len() - i) as u64) as usize;
        all.swap(i, j);
    }
    all.truncate(n);
    ctx.out.array(n);
    for m in &all {
        ctx.out.bulk(m);
    }
    Ok(())
}

fn smove(ctx: &mut Ctx) -> CmdResult {
    let (src, dst, m) = (ctx.args.get(1), ctx.args.get(2), ctx.args.get(3));
    let db = ctx.db();
    let lim = limits(ctx);
    let se = ctx.srv.ks.lookup_write(db, src, ctx.now_ms);
    let de = ctx.srv.ks.lookup_write(db, dst, ctx.now_ms);
    let Some(se) = se else {
        ctx.out.int(0);
        return Ok(());
    };
    check(ctx, Some(se))?;
    check(ctx, de)?;
    if src == dst {
        let found = set::contains(&ctx.srv.ks, se, m);
        ctx.out.int(found as i64);
        return Ok(());
    }
    let (se, removed) = set::remove(&mut ctx.srv.ks, db, se, m);
    if !removed {
        ctx.out.int(0);
        return Ok(());
    }
    notify(ctx, NOTIFY_SET, "srem", src);
    if set::len(&ctx.srv.ks, se) == 0 {
        ctx.srv.ks.delete_entry(db, se);
        notify(ctx, NOTIFY_GENERIC, "del", src);
    }
    // Entries may have moved: find the destination again.
    let de = match ctx.srv.ks.find_raw(db, dst) {
        Some(e) => e,
        None => set::create(&mut ctx.srv.ks, db, dst, m, 1, lim, Ttl::Clear),
    };
    let (_, added) = set::add(&mut ctx.srv.ks, db, de, m, lim);
    ctx.dirty(1 + added as u64);
    if added {
        notify(ctx, NOTIFY_SET, "sadd", dst);
    }
    ctx.out.int(1);
    Ok(())
}

/// Looks up source sets: None for a missing key, WRONGTYPE for any other type (every key
/// is checked, as Redis does, even after a missing one).
fn sources(ctx: &mut Ctx, from: usize, to: usize) -> Result<Vec<Option<Ref>>, CmdError> {
    let db = ctx.db();
    let mut out = Vec::with_capacity(to - from);
    for i in from..to {
        let k = ctx.args.get(i);
        // Read lookups for the STORE forms too, as Redis 7.0 (hit/miss stats, `keymiss`).
        let e = ctx.srv.ks.lookup_read(db, k, ctx.now_ms);
        out.push(check(ctx, e)?);
    }
    // Lookups do not move entries (only touches), so the refs stay valid until a write.
    Ok(out)
}

/// Members common to all sets, in the smallest set's order; stops at `limit` (0: none).
fn intersection(ctx: &Ctx, sets: &[Option<Ref>], limit: u64) -> Vec<Vec<u8>> {
    let ks = &ctx.srv.ks;
    if sets.iter().any(|s| s.is_none()) {
        return vec![];
    }
    let mut sets: Vec<Ref> = sets.iter().flatten().copied().collect();
    sets.sort_by_key(|&e| set::len(ks, e));
    let mut out = vec![];
    let mut done = false;
    set::for_each(ks, sets[0], |m| {
        if done {
            return;
        }
        let b = m.to_vec();
        if sets[1..].iter().all(|&o| set::contains(ks, o, &b)) {
            out.push(b);
            if limit != 0 && out.len() as u64 >= limit {
                done = true;
            }
        }
    });
    out
}

/// Union or difference of the sets, in first-seen order.
fn union_diff(ctx: &Ctx, sets: &[Option<Ref>], diff: bool) -> Vec<Vec<u8>> {
    let ks = &ctx.srv.ks;
    let mut out = vec![];
    if diff {
        let Some(Some(first)) = sets.first() else {
            return out;
        };
        let others: Vec<Ref> = sets[1..].iter().flatten().copied().collect();
        set::for_each(ks, *first, |m| {
            let b = m.to_vec();
            if !others.iter().any(|&o| set::contains(ks, o, &b)) {
                out.push(b);
            }
        });
        return out;
    }
    let mut seen = std::collections::HashSet::new();
    for e in sets.iter().flatten() {
        set::for_each(ks, *e, |m| {
            let b = m.to_vec();
            if !seen.contains(&b) {
                seen.insert(b.clone());
                out.push(b);
            }
        });
    }
    out
}

/// Replies with a computed set. Redis builds it as a set first (an intset while it can
/// be), so a small all-integer result comes back in ascending order; the same here.
fn reply_members(ctx: &mut Ctx, mut ms: Vec<Vec<u8>>) {
    let lim = limits(ctx);
    if ms.len() as u64 <= lim.max_intset {
        let ints: Option<Vec<i64>> = ms.iter().map(|m| set::as_int(m)).collect();
        if let Some(mut ints) = ints {
            ints.sort_unstable();
            ms = ints
                .into_iter()
                .map(|i| i.to_string().into_bytes())
                .collect();
        }
    }
    ctx.out.set(ms.len());
    for m in &ms {
        ctx.out.bulk(m);
    }
}

/// Stores a computed set at `dst` (deleting `dst` when it is empty); replies its size.
/// `event`: its notification (`sinterstore`, `sunionstore`, `sdiffstore`).
fn store(ctx: &mut Ctx, dst: &[u8], ms: Vec<Vec<u8>>, event: &'static str) -> CmdResult {
    let db = ctx.db();
    if ms.is_empty() {
        ctx.out.int(0);
        if ctx.srv.ks.delete_no_lookup(db, dst) {
            ctx.dirty(1);
            notify(ctx, NOTIFY_GENERIC, "del", dst);
        }
        return Ok(());
    }
    let bytes: u64 = ms.iter().map(|m| m.len() as u64 + 24).sum();
    ctx.ensure_arena_room(bytes)?;
    let lim = limits(ctx);
    ctx.srv.ks.find(db, dst, ctx.now_ms);
    set::create_from(&mut ctx.srv.ks, db, dst, &ms, Ttl::Clear, lim);
    ctx.dirty(1);
    ctx.out.int(ms.len() as i64);
    notify(ctx, NOTIFY_SET, event, dst);
    Ok(())
}

fn sinter(ctx: &mut Ctx) -> CmdResult {
    let sets = sources(ctx, 1, ctx.args.len())?;
    let ms = intersection(ctx, &sets, 0);
    // Unlike SUNION/SDIFF, Redis streams the intersection in the smallest set's order.
    ctx.out.set(ms.len());
    for m in &ms {
        ctx.out.bulk(m);
    }
    Ok(())
}

fn sinterstore(ctx: &mut Ctx) -> CmdResult {
    let sets = sources(ctx, 2, ctx.args.len())?;
    let ms = intersection(ctx, &sets, 0);
    let dst = ctx.args.get(1);
    store(ctx, dst, ms, "sinterstore")
}

fn sintercard(ctx: &mut Ctx) -> CmdResult {
    let numkeys = match parse_i64(ctx.args.get(1)) {
        Some(n) if n >= 1 => n as u64,
        _ => return Err(CmdError::err("numkeys should be greater than 0")),
    };
    if numkeys > (ctx.args.len() - 2) as u64 {
        return Err(CmdError::err(
            "Number of keys can't be greater than number of args",
        ));
    }
    let end = 2 + numkeys as usize;
    let mut limit = 0u64;
    let mut i = end;
    while i < ctx.args.len() {
        if ctx.args.is(i, "LIMIT") && i + 1 < ctx.args.len() {
            limit = match parse_i64(ctx.args.get(i + 1)) {
                Some(l) if l >= 0 => l as u64,
                _ => return Err(CmdError::err("LIMIT can't be negative")),
            };
            i += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let sets = sources(ctx, 2, end)?;
    let n = intersection(ctx, &sets, limit).len();
    ctx.out.int(n as i64);
    Ok(())
}

fn sunion(ctx: &mut Ctx) -> CmdResult {
    let sets = sources(ctx, 1, ctx.args.len())?;
    let ms = union_diff(ctx, &sets, false);
    reply_members(ctx, ms);
    Ok(())
}

fn sunionstore(ctx: &mut Ctx) -> CmdResult {
    let sets = sources(ctx, 2, ctx.args.len())?;
    let ms = union_diff(ctx, &sets, false);
    let dst = ctx.args.get(1);
    store(ctx, dst, ms, "sunionstore")
}

fn sdiff(ctx: &mut Ctx) -> CmdResult {
    let sets = sources(ctx, 1, ctx.args.len())?;
    let ms = union_diff(ctx, &sets, true);
    reply_members(ctx, ms);
    Ok(())
}

fn sdiffstore(ctx: &mut Ctx) -> CmdResult {
    let sets = sources(ctx, 2, ctx.args.len())?;
    let ms = union_diff(ctx, &sets, true);
    let dst = ctx.args.get(1);
    store(ctx, dst, ms, "sdiffstore")
}

fn sscan(ctx: &mut Ctx) -> CmdResult {
    let cursor = super::keys::key_scan_cursor(ctx)?;
    let key = ctx.args.get(1);
    let Some(e) = read_set(ctx, key)? else {
        super::keys::empty_scan_reply(ctx);
        return Ok(());
    };
    let (count, pattern) = super::keys::key_scan_opts(ctx)?;
    let (next, mut ms) = set::scan(&ctx.srv.ks, e, cursor, count);
    if let Some(p) = pattern {
        ms.retain(|m| glob_match(p, m, false));
    }
    ctx.out.array(2);
    ctx.out.bulk(next.to_string().as_bytes());
    ctx.out.array(ms.len());
    for m in &ms {
        ctx.out.bulk(m);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::executor::{Client, Server};

    use crate::commands::executor::testing::{bulks, run, sorted};

    fn setup() -> (Server, Box<Client>) {
        crate::commands::executor::testing::server_and_client()
    }

    fn members(srv: &mut Server, c: &mut Client, key: &str) -> Vec<String> {
        sorted(bulks(&run(srv, c, &["SMEMBERS", key])))
    }

    #[test]
    fn computed_all_integer_sets_reply_in_ascending_order() {
        let (mut srv, mut c) = setup();
        let c = &mut *c;
        run(&mut srv, c, &["SADD", "a", "3", "1", "2"]);
        run(&mut srv, c, &["SADD", "b", "10", "-5", "2"]);
        run(&mut srv, c, &["SADD", "w", "x", "1"]);
        assert_eq!(
            bulks(&run(&mut srv, c, &["SUNION", "b", "a"])),
            ["-5", "1", "2", "3", "10"]
        );
        assert_eq!(bulks(&run(&mut srv, c, &["SDIFF", "b", "a"])), ["-5", "10"]);
        // Not all integers: first-seen order (the first set's members first).
        let u = bulks(&run(&mut srv, c, &["SUNION", "w", "a"]));
        assert_eq!(sorted(u[..2].to_vec()), ["1", "x"]);
        assert_eq!(u[2..], ["2", "3"]);
        // Integers with a non-canonical spelling are not integers.
        run(&mut srv, c, &["SADD", "z", "07", "3"]);
        let d = bulks(&run(&mut srv, c, &["SDIFF", "z", "a"]));
        assert_eq!(d, ["07"]);
    }

    #[test]
    fn diff_and_intersection_with_missing_keys() {
        let (mut srv, mut c) = setup();
        let c = &mut *c;
        run(&mut srv, c, &["SADD", "a", "x", "y", "z"]);
        run(&mut srv, c, &["SADD", "b", "y"]);
        assert_eq!(run(&mut srv, c, &["SDIFF", "nokey", "a"]), "*0\r\n");
        assert_eq!(
            sorted(bulks(&run(&mut srv, c, &["SDIFF", "a", "nokey", "b"]))),
            ["x", "z"]
        );
        assert_eq!(run(&mut srv, c, &["SINTER", "a", "nokey"]), "*0\r\n");
        assert_eq!(bulks(&run(&mut srv, c, &["SINTER", "a", "b"])), ["y"]);
        assert_eq!(
            sorted(bulks(&run(&mut srv, c, &["SINTER", "a", "a"]))),
            ["x", "y", "z"]
        );
        assert_eq!(
            sorted(bulks(&run(&mut srv, c, &["SUNION", "nokey", "b", "a"]))),
            ["x", "y", "z"]
        );
        // Every key is type-checked, even after a missing one.
        run(&mut srv, c, &["SET", "s", "v"]);
        for cmd in ["SINTER", "SUNION", "SDIFF"] {
            assert!(
                run(&mut srv, c, &[cmd, "nokey", "s"]).starts_with("-WRONGTYPE"),
                "{cmd}"
            );
        }
    }

    #[test]
    fn sintercard_limit_and_argument_errors() {
        let (mut srv, mut c) = setup();
        let c = &mut *c;
        run(&mut srv, c, &["SADD", "a", "1", "2", "3", "4"]);
        run(&mut srv, c, &["SADD", "b", "2", "3", "4", "5"]);
        assert_eq!(run(&mut srv, c, &["SINTERCARD", "2", "a", "b"]), ":3\r\n");
        assert_eq!(
            run(&mut srv, c, &["SINTERCARD", "2", "a", "b", "LIMIT", "2"]),
            ":2\r\n"
        );
        assert_eq!(
            run(&mut srv, c, &["SINTERCARD", "2", "a", "b", "LIMIT", "0"]),
            ":3\r\n"
        );
        assert_eq!(
            run(&mut srv, c, &["SINTERCARD", "2", "a", "nokey"]),
            ":0\r\n"
        );
        assert_eq!(
            run(&mut srv, c, &["SINTERCARD", "1", "a", "LIMIT", "-1"]),
            "-ERR LIMIT can't be negative\r\n"
        );
        assert_eq!(
            run(&mut srv, c, &["SINTERCARD", "0", "a"]),
            "-ERR numkeys should be greater than 0\r\n"
        );
        assert_eq!(
            run(&mut srv, c, &["SINTERCARD", "3", "a", "b"]),
            "-ERR Number of keys can't be greater than number of args\r\n"
        );
        assert_eq!(
            run(&mut srv, c, &["SINTERCARD", "1", "a", "LIMIT"]),
            "-ERR syntax error\r\n"
        );
    }

    #[test]
    fn store_variants_replace_the_destination_or_delete_it_when_empty() {
        let (mut srv, mut c) = setup();
        let c = &mut *c;
        run(&mut srv, c, &["SADD", "a", "1", "2", "3"]);
        run(&mut srv, c, &["SADD", "b", "3", "4"]);
        run(&mut srv, c, &["SET", "dst", "a string"]);
        assert_eq!(
            run(&mut srv, c, &["SUNIONSTORE", "dst", "a", "b"]),
            ":4\r\n"
        );
        assert_eq!(run(&mut srv, c, &["TYPE", "dst"]), "+set\r\n");
        assert_eq!(members(&mut srv, c, "dst"), ["1", "2", "3", "4"]);
        assert_eq!(
            run(&mut srv, c, &["SINTERSTORE", "dst", "a", "b"]),
            ":1\r\n"
        );
        assert_eq!(members(&mut srv, c, "dst"), ["3"]);
        assert_eq!(run(&mut srv, c, &["SDIFFSTORE", "dst", "a", "b"]), ":2\r\n");
        assert_eq!(members(&mut srv, c, "dst"), ["1", "2"]);
        assert_eq!(
            run(&mut srv, c, &["SINTERSTORE", "dst", "a", "nokey"]),
            ":0\r\n"
        );
        assert_eq!(run(&mut srv, c, &["EXISTS", "dst"]), ":0\r\n");
        // A source may be the destination.
        assert_eq!(run(&mut srv, c, &["SUNIONSTORE", "a", "a", "b"]), ":4\r\n");
        assert_eq!(members(&mut srv, c, "a"), ["1", "2", "3", "4"]);
    }

    #[test]
    fn smove_edge_cases() {
        let (mut srv, mut c) = setup();
        let c = &mut *c;
        run(&mut srv, c, &["SADD", "a", "m", "n"]);
        assert_eq!(run(&mut srv, c, &["SMOVE", "nokey", "a", "m"]), ":0\r\n");
        assert_eq!(run(&mut srv, c, &["SMOVE", "a", "a", "m"]), ":1\r\n");
        assert_eq!(run(&mut srv, c, &["SMOVE", "a", "a", "zz"]), ":0\r\n");
        assert_eq!(members(&mut srv, c, "a"), ["m", "n"]);
        run(&mut srv, c, &["SET", "s", "v"]);
        assert!(run(&mut srv, c, &["SMOVE", "a", "s", "m"]).starts_with("-WRONGTYPE"));
        assert!(run(&mut srv, c, &["SMOVE", "s", "a", "m"]).starts_with("-WRONGTYPE"));
        assert_eq!(members(&mut srv, c, "a"), ["m", "n"]);
        assert_eq!(run(&mut srv, c, &["SMOVE", "a", "b", "zz"]), ":0\r\n");
        assert_eq!(run(&mut srv, c, &["EXISTS", "b"]), ":0\r\n");
        run(&mut srv, c, &["SADD", "b", "m"]);
        assert_eq!(run(&mut srv, c, &["SMOVE", "a", "b", "m"]), ":1\r\n");
        assert_eq!(run(&mut srv, c, &["SCARD", "b"]), ":1\r\n");
        // The last member: the source goes, a new destination is created.
        assert_eq!(run(&mut srv, c, &["SMOVE", "a", "c", "n"]), ":1\r\n");
        assert_eq!(run(&mut srv, c, &["EXISTS", "a"]), ":0\r\n");
        assert_eq!(members(&mut srv, c, "c"), ["n"]);
    }

    #[test]
    fn spop_and_srandmember_counts() {
        let (mut srv, mut c) = setup();
        let c = &mut *c;
        assert_eq!(run(&mut srv, c, &["SPOP", "nokey"]), "$-1\r\n");
        assert_eq!(run(&mut srv, c, &["SPOP", "nokey", "3"]), "*0\r\n");
        assert_eq!(run(&mut srv, c, &["SRANDMEMBER", "nokey"]), "$-1\r\n");
        assert_eq!(run(&mut srv, c, &["SRANDMEMBER", "nokey", "-3"]), "*0\r\n");
        let mut add = vec!["SADD".to_string(), "k".to_string()];
        add.extend((0..12).map(|i| format!("m{i}")));
        let add: Vec<&str> = add.iter().map(String::as_str).collect();
        run(&mut srv, c, &add);
        assert_eq!(
            run(&mut srv, c, &["SPOP", "k", "-1"]),
            "-ERR value is out of range, must be positive\r\n"
        );
        assert_eq!(
            run(&mut srv, c, &["SPOP", "k", "1", "2"]),
            "-ERR syntax error\r\n"
        );
        assert_eq!(run(&mut srv, c, &["SPOP", "k", "0"]), "*0\r\n");
        assert_eq!(
            run(&mut srv, c, &["SRANDMEMBER", "k", "-9223372036854775808"]),
            "-ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807\r\n"
        );
        assert_eq!(
            bulks(&run(&mut srv, c, &["SRANDMEMBER", "k", "-30"])).len(),
            30
        );
        // Positive: distinct, at most the whole set, on each path (few of many, most of
        // them, all).
        for n in [1usize, 4, 5, 11, 12, 40] {
            let r = bulks(&run(&mut srv, c, &["SRANDMEMBER", "k", &n.to_string()]));
            assert_eq!(r.len(), n.min(12), "count {n}");
            let mut d = r.clone();
            d.sort();
            d.dedup();
            assert_eq!(d.len(), r.len(), "count {n}: repeats in {r:?}");
        }
        assert_eq!(run(&mut srv, c, &["SCARD", "k"]), ":12\r\n");
        let popped = bulks(&run(&mut srv, c, &["SPOP", "k", "5"]));
        assert_eq!(popped.len(), 5);
        for m in &popped {
            assert_eq!(run(&mut srv, c, &["SISMEMBER", "k", m]), ":0\r\n");
        }
        assert_eq!(run(&mut srv, c, &["SCARD", "k"]), ":7\r\n");
        // At least the whole set: all of it, and the key goes.
        let rest = bulks(&run(&mut srv, c, &["SPOP", "k", "7"]));
        assert_eq!(rest.len(), 7);
        assert_eq!(run(&mut srv, c, &["EXISTS", "k"]), ":0\r\n");
        let mut all = popped;
        all.extend(rest);
        all.sort();
        all.dedup();
        assert_eq!(all.len(), 12);
    }

    /// Runs SPOP's handler directly with the log on, returning the reply's members and
    /// the commands it asks the log to record instead of itself.
    fn spop_logged(
        srv: &mut Server,
        c: &mut Client,
        args: &[&str],
    ) -> (Vec<String>, Vec<Vec<String>>) {
        let spec = COMMANDS.iter().find(|s| s.name == "spop").unwrap();
        srv.aof.enabled = true;
        let out = crate::commands::executor::testing::run_handler(srv, c, spec, args);
        srv.aof.enabled = false;
        let forms = std::mem::take(&mut srv.aof.command_forms)
            .into_iter()
            .map(|f| {
                f.iter()
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect()
            })
            .collect();
        (bulks(&out), forms)
    }

    #[test]
    fn spop_logs_the_members_it_popped_in_batches_or_a_del_for_the_whole_set() {
        let (mut srv, mut c) = setup();
        let c = &mut *c;
        let mut add = vec!["SADD".to_string(), "k".to_string()];
        add.extend((0..3000).map(|i| format!("m{i}")));
        let add: Vec<&str> = add.iter().map(String::as_str).collect();
        assert_eq!(run(&mut srv, c, &add), ":3000\r\n");
        let (popped, forms) = spop_logged(&mut srv, c, &["SPOP", "k", "2500"]);
        assert_eq!(popped.len(), 2500);
        assert_eq!(
            forms.iter().map(|f| f.len() - 2).collect::<Vec<_>>(),
            [1024, 1024, 452]
        );
        let mut logged = Vec::new();
        for f in &forms {
            assert_eq!(f[..2], ["SREM", "k"]);
            logged.extend(f[2..].iter().cloned());
        }
        assert_eq!(logged, popped, "the log removes exactly what was replied");
        let (one, forms) = spop_logged(&mut srv, c, &["SPOP", "k"]);
        assert_eq!(one.len(), 1);
        assert_eq!(
            forms,
            [vec!["SREM".to_string(), "k".to_string(), one[0].clone()]]
        );
        let (rest, forms) = spop_logged(&mut srv, c, &["SPOP", "k", "1000"]);
        assert_eq!(rest.len(), 499);
        assert_eq!(forms, [vec!["DEL".to_string(), "k".to_string()]]);
        assert_eq!(run(&mut srv, c, &["EXISTS", "k"]), ":0\r\n");
    }

    #[test]
    fn smismember_on_a_missing_key_is_all_zeroes() {
        let (mut srv, mut c) = setup();
        let c = &mut *c;
        assert_eq!(
            run(&mut srv, c, &["SMISMEMBER", "nokey", "a", "b"]),
            "*2\r\n:0\r\n:0\r\n"
        );
        run(&mut srv, c, &["SADD", "k", "b"]);
        assert_eq!(
            run(&mut srv, c, &["SMISMEMBER", "k", "a", "b", "b"]),
            "*3\r\n:0\r\n:1\r\n:1\r\n"
        );
    }
}
