//! List commands (Redis's `t_list.c`), over the arena lists of `crate::collections::list`.
//! The blocking variants (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP) serve at once when a
//! key holds elements and otherwise park the client (src/commands/executor/blocking.rs); a served
//! pop is logged in its non-blocking form (LPOP/RPOP/LMOVE/RPOPLPUSH).

use super::notify::{notify, NOTIFY_GENERIC, NOTIFY_LIST};
use super::{CmdError, CmdResult, CommandSpec, Ctx, DENYOOM, FAST, READONLY, WRITE};
use super::{BLOCKING, NOSCRIPT};
use crate::arena::Ref;
use crate::collections::list;
use crate::collections::listpack::Val;
use crate::commands::executor::blocking::{self, TimeoutReply};
use crate::keyspace::Kind;
use crate::protocol::reply::Reply;

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new("lpush", -3, WRITE | DENYOOM | FAST, "list", lpush).keys(1, 1, 1).doc("Prepends one or more elements to a list. Creates the key if it doesn't exist.", "1.0.0"),
    CommandSpec::new("rpush", -3, WRITE | DENYOOM | FAST, "list", rpush).keys(1, 1, 1).doc("Appends one or more elements to a list. Creates the key if it doesn't exist.", "1.0.0"),
    CommandSpec::new("lpushx", -3, WRITE | DENYOOM | FAST, "list", lpushx).keys(1, 1, 1).doc("Prepends one or more elements to a list only when the list exists.", "2.2.0"),
    CommandSpec::new("rpushx", -3, WRITE | DENYOOM | FAST, "list", rpushx).keys(1, 1, 1).doc("Appends an element to a list only when the list exists.", "2.2.0"),
    CommandSpec::new("lpop", -2, WRITE | FAST, "list", lpop).keys(1, 1, 1).doc("Returns the first elements in a list after removing it. Deletes the list if the last element was popped.", "1.0.0"),
    CommandSpec::new("rpop", -2, WRITE | FAST, "list", rpop).keys(1, 1, 1).doc("Returns and removes the last elements of a list. Deletes the list if the last element was popped.", "1.0.0"),
    CommandSpec::new("lrange", 4, READONLY, "list", lrange).keys(1, 1, 1).doc("Returns a range of elements from a list.", "1.0.0"),
    CommandSpec::new("llen", 2, READONLY | FAST, "list", llen).keys(1, 1, 1).doc("Returns the length of a list.", "1.0.0"),
    CommandSpec::new("lindex", 3, READONLY, "list", lindex).keys(1, 1, 1).doc("Returns an element from a list by its index.", "1.0.0"),
    CommandSpec::new("lset", 4, WRITE | DENYOOM, "list", lset).keys(1, 1, 1).doc("Sets the value of an element in a list by its index.", "1.0.0"),
    CommandSpec::new("lrem", 4, WRITE, "list", lrem).keys(1, 1, 1).doc("Removes elements from a list. Deletes the list if the last element was removed.", "1.0.0"),
    CommandSpec::new("ltrim", 4, WRITE, "list", ltrim).keys(1, 1, 1).doc("Removes elements from both ends a list. Deletes the list if all elements were trimmed.", "1.0.0"),
    CommandSpec::new("linsert", 5, WRITE | DENYOOM, "list", linsert).keys(1, 1, 1).doc("Inserts an element before or after another element in a list.", "2.2.0"),
    CommandSpec::new("lpos", -3, READONLY, "list", lpos).keys(1, 1, 1).doc("Returns the index of matching elements in a list.", "6.0.6"),
    CommandSpec::new("lmove", 5, WRITE | DENYOOM, "list", lmove).keys(1, 2, 1).doc("Returns an element after popping it from one list and pushing it to another. Deletes the list if the last element was moved.", "6.2.0"),
    CommandSpec::new("rpoplpush", 3, WRITE | DENYOOM, "list", rpoplpush).keys(1, 2, 1).doc("Returns the last element of a list after removing and pushing it to another list. Deletes the list if the last element was popped.", "1.2.0"),
    CommandSpec::new("lmpop", -4, WRITE, "list", lmpop).doc("Returns multiple elements from a list after removing them. Deletes the list if the last element was popped.", "7.0.0"),
    CommandSpec::new("blpop", -3, WRITE | NOSCRIPT | BLOCKING, "list", blpop).keys(1, -2, 1).doc("Removes and returns the first element in a list. Blocks until an element is available otherwise. Deletes the list if the last element was popped.", "2.0.0"),
    CommandSpec::new("brpop", -3, WRITE | NOSCRIPT | BLOCKING, "list", brpop).keys(1, -2, 1).doc("Removes and returns the last element in a list. Blocks until an element is available otherwise. Deletes the list if the last element was popped.", "2.0.0"),
    CommandSpec::new("blmove", 6, WRITE | DENYOOM | NOSCRIPT | BLOCKING, "list", blmove).keys(1, 2, 1).doc("Pops an element from a list, pushes it to another list and returns it. Blocks until an element is available otherwise. Deletes the list if the last element was moved.", "6.2.0"),
    CommandSpec::new("brpoplpush", 4, WRITE | DENYOOM | NOSCRIPT | BLOCKING, "list", brpoplpush).keys(1, 2, 1).doc("Pops an element from a list, pushes it to another list and returns it. Block until an element is available otherwise. Deletes the list if the last element was popped.", "2.2.0"),
    CommandSpec::new("blmpop", -5, WRITE | BLOCKING, "list", blmpop).doc("Pops the first element from one of multiple lists. Blocks until an element is available otherwise. Deletes the list if the last element was popped.", "7.0.0"),
];

fn check(ctx: &Ctx, e: Option<Ref>) -> Result<Option<Ref>, CmdError> {
    super::of_kind(ctx, e, Kind::List)
}
fn read_list(ctx: &mut Ctx, key: &[u8]) -> Result<Option<Ref>, CmdError> {
    let e = ctx.srv.ks.lookup_read(ctx.client.db, key, ctx.now_ms);
    check(ctx, e)
}
fn write_list(ctx: &mut Ctx, key: &[u8]) -> Result<Option<Ref>, CmdError> {
    let e = ctx.srv.ks.lookup_write(ctx.client.db, key, ctx.now_ms);
    check(ctx, e)
}

pub fn reply_val(out: &mut Reply, v: Val) {
    match v {
        Val::Str(s) => out.bulk(s),
        Val::Int(i) => out.bulk_i64(i),
    }
}

/// Deletes the key if its list became empty (Redis never keeps empty collections),
/// with its `del` notification.
fn delete_if_empty(ctx: &mut Ctx, key: &[u8], e: Ref) {
    if list::len(&ctx.srv.ks, e) == 0 {
        ctx.srv.ks.delete_entry(ctx.client.db, e);
        notify(ctx, NOTIFY_GENERIC, "del", key);
    }
}

/// After elements were popped from `key` (entry `e`): the pop's notification, then the
/// key's deletion if that emptied it (Redis's listElementsRemoved).
fn popped(ctx: &mut Ctx, key: &[u8], head: bool, e: Ref) {
    notify(ctx, NOTIFY_LIST, if head { "lpop" } else { "rpop" }, key);
    delete_if_empty(ctx, key, e);
}

fn push_generic(ctx: &mut Ctx, head: bool, only_existing: bool) -> CmdResult {
    let db = ctx.db();
    let key = ctx.args.get(1);
    let mut e = match write_list(ctx, key)? {
        Some(e) => e,
        None if only_existing => {
            ctx.out.int(0);
            return Ok(());
        }
        None => list::create(&mut ctx.srv.ks, db, key),
    };
    let fill = list::Fill::from_config(&ctx.srv.config);
    for i in 2..ctx.args.len() {
        e = list::push(&mut ctx.srv.ks, db, e, ctx.args.get(i), head, fill);
    }
    ctx.dirty((ctx.args.len() - 2) as u64);
    ctx.out.int(list::len(&ctx.srv.ks, e) as i64);
    notify(ctx, NOTIFY_LIST, if head { "lpush" } else { "rpush" }, key);
    Ok(())
}
fn lpush(ctx: &mut Ctx) -> CmdResult {
    push_generic(ctx, true, false)
}
fn rpush(ctx: &mut Ctx) -> CmdResult {
    push_generic(ctx, false, false)
}
fn lpushx(ctx: &mut Ctx) -> CmdResult {
    push_generic(ctx, true, true)
}
fn rpushx(ctx: &mut Ctx) -> CmdResult {
    push_generic(ctx, false, true)
}

/// Pops up to `count` elements from an existing list; the caller calls [`popped`] (which
/// deletes an emptied list) with the entry returned.
fn pop_n(ctx: &mut Ctx, e: Ref, head: bool, count: u64) -> (Ref, Vec<Vec<u8>>) {
    let db = ctx.db();
    let n = count.min(list::len(&ctx.srv.ks, e));
    let mut out = Vec::with_capacity(n.min(1 << 16) as usize);
    let mut e = e;
    for _ in 0..n {
        let (ne, v) = list::pop(&mut ctx.srv.ks, db, e, head);
        e = ne;
        out.push(v);
    }
    (e, out)
}

fn pop_generic(ctx: &mut Ctx, head: bool) -> CmdResult {
    if ctx.args.len() > 3 {
        return Err(CmdError::Other(format!(
            "ERR wrong number of arguments for '{}' command",
            ctx.spec.name
        )));
    }
    let count = if ctx.args.len() == 3 {
        match crate::util::parse_i64(ctx.args.get(2)) {
            Some(n) if n >= 0 => Some(n as u64),
            _ => return Err(CmdError::err("value is out of range, must be positive")),
        }
    } else {
        None
    };
    let key = ctx.args.get(1);
    let Some(e) = write_list(ctx, key)? else {
        if count.is_some() {
            ctx.out.null_array();
        } else {
            ctx.out.null();
        }
        return Ok(());
    };
    match count {
        None => {
            let (e, v) = pop_n(ctx, e, head, 1);
            ctx.dirty(1);
            ctx.out.bulk(&v[0]);
            popped(ctx, key, head, e);
        }
        Some(0) => ctx.out.array(0),
        Some(c) => {
            let (e, v) = pop_n(ctx, e, head, c);
            ctx.dirty(v.len() as u64);
            ctx.out.array(v.len());
            for x in &v {
                ctx.out.bulk(x);
            }
            popped(ctx, key, head, e);
        }
    }
    Ok(())
}
fn lpop(ctx: &mut Ctx) -> CmdResult {
    pop_generic(ctx, true)
}
fn rpop(ctx: &mut Ctx) -> CmdResult {
    pop_generic(ctx, false)
}

/// Redis's start/end normalisation for LRANGE/LTRIM: Some((start, end)) inclusive, or
/// None for an empty range.
fn norm_range(start: i64, end: i64, len: u64) -> Option<(u64, u64)> {
    let len = len as i64;
    let mut s = if start < 0 {
        start.saturating_add(len)
    } else {
        start
    };
    let mut e = if end < 0 {
        end.saturating_add(len)
    } else {
        end
    };
    if s < 0 {
        s = 0;
    }
    if s > e || s >= len {
        return None;
    }
    if e >= len {
        e = len - 1;
    }
    Some((s as u64, e as u64))
}

fn lrange(ctx: &mut Ctx) -> CmdResult {
    let start = ctx.args.i64(2)?;
    let end = ctx.args.i64(3)?;
    let key = ctx.args.get(1);
    let Some(e) = read_list(ctx, key)? else {
        ctx.out.array(0);
        return Ok(());
    };
    let ks = &ctx.srv.ks;
    match norm_range(start, end, list::len(ks, e)) {
        None => ctx.out.array(0),
        Some((s, t)) => {
            let n = t - s + 1;
            ctx.out.array(n as usize);
            let mut left = n;
            let out = &mut ctx.out;
            list::walk(ks, e, s, false, |v| {
                reply_val(out, v);
                left -= 1;
                left > 0
            });
        }
    }
    Ok(())
}

fn llen(ctx: &mut Ctx) -> CmdResult {
    let key = ctx.args.get(1);
    let n = match read_list(ctx, key)? {
        Some(e) => list::len(&ctx.srv.ks, e),
        None => 0,
    };
    ctx.out.int(n as i64);
    Ok(())
}

/// A client index (negative from the end) as a position, if in range.
fn abs_index(idx: i64, len: u64) -> Option<u64> {
    let i = if idx < 0 {
        idx.checked_add(len as i64)?
    } else {
        idx
    };
    (i >= 0 && (i as u64) < len).then_some(i as u64)
}

fn lindex(ctx: &mut Ctx) -> CmdResult {
    let key = ctx.args.get(1);
    // Redis looks the key up before parsing the index.
    let Some(e) = read_list(ctx, key)? else {
        ctx.out.null();
        return Ok(());
    };
    let idx = ctx.args.i64(2)?;
    let ks = &ctx.srv.ks;
    match abs_index(idx, list::len(ks, e)) {
        None => ctx.out.null(),
        Some(i) => {
            let out = &mut ctx.out;
            list::walk(ks, e, i, false, |v| {
                reply_val(out, v);
                false
            });
        }
    }
    Ok(())
}

fn lset(ctx: &mut Ctx) -> CmdResult {
    let key = ctx.args.get(1);
    let Some(e) = write_list(ctx, key)? else {
        return Err(CmdError::NoSuchKey);
    };
    let idx = ctx.args.i64(2)?;
    let Some(i) = abs_index(idx, list::len(&ctx.srv.ks, e)) else {
        return Err(CmdError::err("index out of range"));
    };
    let Some((seg, at)) = list::locate(&ctx.srv.ks, e, i) else {
        return Err(CmdError::err("index out of range"));
    };
    let mut el = list::seg_elems(&ctx.srv.ks, e, seg);
    el[at] = ctx.args.get(3).to_vec();
    let db = ctx.db();
    let fill = list::Fill::from_config(&ctx.srv.config);
    list::set_segment(&mut ctx.srv.ks, db, e, seg, &el, fill);
    ctx.dirty(1);
    ctx.out.ok();
    notify(ctx, NOTIFY_LIST, "lset", key);
    Ok(())
}

fn lrem(ctx: &mut Ctx) -> CmdResult {
    let key = ctx.args.get(1);
    let count = ctx.args.i64(2)?;
    let elem = ctx.args.get(3);
    let Some(mut e) = write_list(ctx, key)? else {
        ctx.out.int(0);
        return Ok(());
    };
    let db = ctx.db();
    let reverse = count < 0;
    let limit = if count == 0 {
        u64::MAX
    } else {
        count.unsigned_abs()
    };
    let mut removed = 0u64;
    let fill = list::Fill::from_config(&ctx.srv.config);
    let mut segs = list::segments(&ctx.srv.ks, e);
    if reverse {
        segs.reverse();
    }
    for seg in segs {
        if removed >= limit {
            break;
        }
        let l = list::seg_lp(&ctx.srv.ks, e, seg);
        if !crate::collections::listpack::iter(l).any(|v| v.eq_bytes(elem)) {
            continue;
        }
        let mut el = list::seg_elems(&ctx.srv.ks, e, seg);
        if reverse {
            el.reverse();
        }
        el.retain(|x| {
            if removed < limit && x.as_slice() == elem {
                removed += 1;
                false
            } else {
                true
            }
        });
        if reverse {
            el.reverse();
        }
        e = list::set_segment(&mut ctx.srv.ks, db, e, seg, &el, fill);
    }
    if removed > 0 {
        notify(ctx, NOTIFY_LIST, "lrem", key);
        delete_if_empty(ctx, key, e);
        ctx.dirty(removed);
    }
    ctx.out.int(removed as i64);
    Ok(())
}

fn ltrim(ctx: &mut Ctx) -> CmdResult {
    let key = ctx.args.get(1);
    let start = ctx.args.i64(2)?;
    let end = ctx.args.i64(3)?;
    let Some(e) = write_list(ctx, key)? else {
        ctx.out.ok();
        return Ok(());
    };
    let db = ctx.db();
    let len = list::len(&ctx.srv.ks, e);
    let (l, r) = match norm_range(start, end, len) {
        None => (len, 0),
        Some((s, t)) => (s, len - t - 1),
    };
    let mut e = e;
    if l > 0 {
        e = list::drop_end(&mut ctx.srv.ks, db, e, true, l);
    }
    if r > 0 && l < len {
        e = list::drop_end(&mut ctx.srv.ks, db, e, false, r);
    }
    notify(ctx, NOTIFY_LIST, "ltrim", key);
    delete_if_empty(ctx, key, e);
    ctx.dirty(l + r);
    ctx.out.ok();
    Ok(())
}

fn linsert(ctx: &mut Ctx) -> CmdResult {
    let after = if ctx.args.is(2, "AFTER") {
        true
    } else if ctx.args.is(2, "BEFORE") {
        false
    } else {
        return Err(CmdError::Syntax);
    };
    let key = ctx.args.get(1);
    let Some(e) = write_list(ctx, key)? else {
        ctx.out.int(0);
        return Ok(());
    };
    let (pivot, elem) = (ctx.args.get(3), ctx.args.get(4));
    let db = ctx.db();
    for seg in list::segments(&ctx.srv.ks, e) {
        let l = list::seg_lp(&ctx.srv.ks, e, seg);
        let Some(pos) = crate::collections::listpack::iter(l).position(|v| v.eq_bytes(pivot))
        else {
            continue;
        };
        let mut el = list::seg_elems(&ctx.srv.ks, e, seg);
        el.insert(if after { pos + 1 } else { pos }, elem.to_vec());
        let fill = list::Fill::from_config(&ctx.srv.config);
        let e = list::set_segment(&mut ctx.srv.ks, db, e, seg, &el, fill);
        ctx.dirty(1);
        notify(ctx, NOTIFY_LIST, "linsert", key);
        ctx.out.int(list::len(&ctx.srv.ks, e) as i64);
        return Ok(());
    }
    ctx.out.int(-1);
    Ok(())
}

fn lpos(ctx: &mut Ctx) -> CmdResult {
    let mut rank: i64 = 1;
    let mut count: Option<u64> = None;
    let mut maxlen: u64 = 0;
    let mut i = 3;
    while i < ctx.args.len() {
        let has_val = i + 1 < ctx.args.len();
        if ctx.args.is(i, "RANK") && has_val {
            rank = ctx.args.i64(i + 1)?;
            if rank == 0 {
                return Err(CmdError::err("RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list"));
            }
        } else if ctx.args.is(i, "COUNT") && has_val {
            let c = ctx.args.i64(i + 1)?;
            if c < 0 {
                return Err(CmdError::err("COUNT can't be negative"));
            }
            count = Some(c as u64);
        } else if ctx.args.is(i, "MAXLEN") && has_val {
            let m = ctx.args.i64(i + 1)?;
            if m < 0 {
                return Err(CmdError::err("MAXLEN can't be negative"));
            }
            maxlen = m as u64;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 2;
    }
    let key = ctx.args.get(1);
    let elem = ctx.args.get(2);
    let Some(e) = read_list(ctx, key)? else {
        if count.is_some() {
            ctx.out.array(0);
        } else {
            ctx.out.null();
        }
        return Ok(());
    };
    let ks = &ctx.srv.ks;
    let len = list::len(ks, e);
    let reverse = rank < 0;
    // Redis 7.0 negates RANK in a C long: -LONG_MIN stays negative, so every match
    // "reaches" the rank and the first match from the tail is reported.
    let mut skip = if rank == i64::MIN {
        0
    } else {
        rank.unsigned_abs() - 1
    };
    let want = match count {
        // (The same overflow makes Redis's COUNT test never true: all matches.)
        Some(_) if rank == i64::MIN => u64::MAX,
        Some(0) => u64::MAX,
        Some(c) => c,
        None => 1,
    };
    let mut found: Vec<u64> = vec![];
    let mut idx = if reverse { len - 1 } else { 0 };
    let mut scanned = 0u64;
    if len > 0 {
        list::walk(ks, e, idx, reverse, |v| {
            if maxlen != 0 && scanned >= maxlen {
                return false;
            }
            scanned += 1;
            if v.eq_bytes(elem) {
                if skip > 0 {
                    skip -= 1;
                } else {
                    found.push(idx);
                    if found.len() as u64 >= want {
                        return false;
                    }
                }
            }
            if reverse {
                idx = idx.wrapping_sub(1);
            } else {
                idx += 1;
            }
            true
        });
    }
    if count.is_some() {
        ctx.out.array(found.len());
        for f in found {
            ctx.out.int(f as i64);
        }
    } else {
        match found.first() {
            Some(&f) => ctx.out.int(f as i64),
            None => ctx.out.null(),
        }
    }
    Ok(())
}

fn parse_side(ctx: &Ctx, i: usize) -> Result<bool, CmdError> {
    if ctx.args.is(i, "LEFT") {
        Ok(true)
    } else if ctx.args.is(i, "RIGHT") {
        Ok(false)
    } else {
        Err(CmdError::Syntax)
    }
}

fn side_name(head: bool) -> Vec<u8> {
    if head {
        b"LEFT".to_vec()
    } else {
        b"RIGHT".to_vec()
    }
}

/// LMOVE / RPOPLPUSH and their blocking forms (`deadline`: Some for BLMOVE/BRPOPLPUSH).
fn lmove_generic(ctx: &mut Ctx, from_head: bool, to_head: bool) -> CmdResult {
    lmove_or_block(ctx, from_head, to_head, None)
}

fn lmove_or_block(
    ctx: &mut Ctx,
    from_head: bool,
    to_head: bool,
    deadline: Option<i64>,
) -> CmdResult {
    let (src, dst) = (ctx.args.get(1), ctx.args.get(2));
    let db = ctx.db();
    let Some(e) = write_list(ctx, src)? else {
        match deadline {
            // Redis answers a timed-out BLMOVE with a null array, one that may not
            // block (inside MULTI) with a null bulk.
            Some(d) if blocking::may_block(ctx) => blocking::block(
                ctx,
                vec![src.to_vec()],
                d,
                Kind::List,
                TimeoutReply::NullArray,
            ),
            _ => ctx.out.null(),
        }
        return Ok(());
    };
    if deadline.is_some() {
        // Logged as the non-blocking form (replay must never wait).
        ctx.srv.propagate_as = Some(if ctx.spec.name == "brpoplpush" {
            vec![b"RPOPLPUSH".to_vec(), src.to_vec(), dst.to_vec()]
        } else {
            vec![
                b"LMOVE".to_vec(),
                src.to_vec(),
                dst.to_vec(),
                side_name(from_head),
                side_name(to_head),
            ]
        });
    }
    // The destination's type is checked before anything is popped.
    let d = ctx.srv.ks.lookup_write(db, dst, ctx.now_ms);
    check(ctx, d)?;
    let e = ctx.srv.ks.find_raw(db, src).unwrap_or(e);
    // As Redis: pop, push (the source may be the destination, so an emptied source is
    // deleted only after the push), then the pop's notification and the deletion.
    let (_, mut v) = pop_n(ctx, e, from_head, 1);
    let v = v.pop().unwrap_or_default();
    let d = match ctx.srv.ks.find_raw(db, dst) {
        Some(d) => d,
        None => list::create(&mut ctx.srv.ks, db, dst),
    };
    let fill = list::Fill::from_config(&ctx.srv.config);
    list::push(&mut ctx.srv.ks, db, d, &v, to_head, fill);
    ctx.dirty(2);
    notify(
        ctx,
        NOTIFY_LIST,
        if to_head { "lpush" } else { "rpush" },
        dst,
    );
    ctx.out.bulk(&v);
    if let Some(e) = ctx.srv.ks.find_raw(db, src) {
        popped(ctx, src, from_head, e);
    }
    Ok(())
}

fn lmove(ctx: &mut Ctx) -> CmdResult {
    let from = parse_side(ctx, 3)?;
    let to = parse_side(ctx, 4)?;
    lmove_generic(ctx, from, to)
}

fn rpoplpush(ctx: &mut Ctx) -> CmdResult {
    lmove_generic(ctx, false, true)
}

fn blmove(ctx: &mut Ctx) -> CmdResult {
    let from = parse_side(ctx, 3)?;
    let to = parse_side(ctx, 4)?;
    let deadline = blocking::parse_timeout(ctx.args.get(5), ctx.now_ms)?;
    lmove_or_block(ctx, from, to, Some(deadline))
}

fn brpoplpush(ctx: &mut Ctx) -> CmdResult {
    let deadline = blocking::parse_timeout(ctx.args.get(3), ctx.now_ms)?;
    lmove_or_block(ctx, false, true, Some(deadline))
}

/// BLPOP / BRPOP: the first non-empty key (in argument order) serves; otherwise block.
fn bpop_generic(ctx: &mut Ctx, head: bool) -> CmdResult {
    let n = ctx.args.len();
    let deadline = blocking::parse_timeout(ctx.args.get(n - 1), ctx.now_ms)?;
    for k in 1..n - 1 {
        let key = ctx.args.get(k);
        let Some(e) = write_list(ctx, key)? else {
            continue;
        };
        let (e, mut v) = pop_n(ctx, e, head, 1);
        let v = v.pop().unwrap_or_default();
        ctx.dirty(1);
        ctx.srv.propagate_as = Some(vec![
            if head {
                b"LPOP".to_vec()
            } else {
                b"RPOP".to_vec()
            },
            key.to_vec(),
        ]);
        ctx.out.array(2);
        ctx.out.bulk(key);
        ctx.out.bulk(&v);
        popped(ctx, key, head, e);
        return Ok(());
    }
    if blocking::may_block(ctx) {
        let keys = (1..n - 1).map(|k| ctx.args.get(k).to_vec()).collect();
        blocking::block(ctx, keys, deadline, Kind::List, TimeoutReply::NullArray);
    } else {
        ctx.out.null_array();
    }
    Ok(())
}
fn blpop(ctx: &mut Ctx) -> CmdResult {
    bpop_generic(ctx, true)
}
fn brpop(ctx: &mut Ctx) -> CmdResult {
    bpop_generic(ctx, false)
}

fn blmpop(ctx: &mut Ctx) -> CmdResult {
    lmpop_generic(ctx, 2, true)
}

fn lmpop(ctx: &mut Ctx) -> CmdResult {
    lmpop_generic(ctx, 1, false)
}

/// LMPOP (`first` = 1) and BLMPOP (`first` = 2, after the timeout).
fn lmpop_generic(ctx: &mut Ctx, first: usize, block: bool) -> CmdResult {
    let numkeys = match crate::util::parse_i64(ctx.args.get(first)) {
        Some(n) if n > 0 => n as u64,
        _ => return Err(CmdError::err("numkeys should be greater than 0")),
    };
    let argc = ctx.args.len() as u64;
    if numkeys > argc - 2 - first as u64 {
        return Err(CmdError::Syntax);
    }
    let side_at = first + 1 + numkeys as usize;
    let head = parse_side(ctx, side_at)?;
    let mut count = 1u64;
    let mut i = side_at + 1;
    let mut seen_count = false;
    while i < ctx.args.len() {
        if ctx.args.is(i, "COUNT") && i + 1 < ctx.args.len() && !seen_count {
            count = match crate::util::parse_i64(ctx.args.get(i + 1)) {
                Some(n) if n > 0 => n as u64,
                _ => return Err(CmdError::err("count should be greater than 0")),
            };
            seen_count = true;
            i += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    // As Redis: BLMPOP's timeout is checked after its other arguments.
    let deadline = if block {
        Some(blocking::parse_timeout(ctx.args.get(1), ctx.now_ms)?)
    } else {
        None
    };
    for k in first + 1..side_at {
        let key = ctx.args.get(k);
        let Some(e) = write_list(ctx, key)? else {
            continue;
        };
        let (e, v) = pop_n(ctx, e, head, count);
        ctx.dirty(v.len() as u64);
        // Logged (and signalled) as a pop of the one key it changed.
        {
            ctx.srv.propagate_as = Some(vec![
                if head {
                    b"LPOP".to_vec()
                } else {
                    b"RPOP".to_vec()
                },
                key.to_vec(),
                v.len().to_string().into_bytes(),
            ]);
        }
        ctx.out.array(2);
        ctx.out.bulk(key);
        ctx.out.array(v.len());
        for x in &v {
            ctx.out.bulk(x);
        }
        popped(ctx, key, head, e);
        return Ok(());
    }
    match deadline {
        Some(d) if blocking::may_block(ctx) => {
            let keys = (first + 1..side_at)
                .map(|k| ctx.args.get(k).to_vec())
                .collect();
            blocking::block(ctx, keys, d, Kind::List, TimeoutReply::NullArray);
        }
        _ => ctx.out.null_array(),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::executor::{Client, Server};

    #[test]
    fn range_normalisation_clamps_and_empties_like_redis() {
        assert_eq!(norm_range(0, -1, 3), Some((0, 2)));
        assert_eq!(norm_range(-100, 100, 3), Some((0, 2)));
        assert_eq!(norm_range(-1, -1, 5), Some((4, 4)));
        assert_eq!(norm_range(1, 1, 5), Some((1, 1)));
        assert_eq!(norm_range(2, 1, 3), None);
        assert_eq!(norm_range(3, 5, 3), None, "start past the end");
        assert_eq!(norm_range(0, 0, 0), None, "empty list");
        assert_eq!(norm_range(-6, -6, 5), None, "end before the head");
        assert_eq!(norm_range(i64::MIN, i64::MAX, 5), Some((0, 4)));
        assert_eq!(norm_range(i64::MIN, i64::MIN, 3), None);
        assert_eq!(norm_range(i64::MAX, i64::MAX, 3), None);
    }

    #[test]
    fn index_from_either_end_or_none() {
        assert_eq!(abs_index(0, 3), Some(0));
        assert_eq!(abs_index(2, 3), Some(2));
        assert_eq!(abs_index(3, 3), None);
        assert_eq!(abs_index(-1, 3), Some(2));
        assert_eq!(abs_index(-3, 3), Some(0));
        assert_eq!(abs_index(-4, 3), None);
        assert_eq!(abs_index(0, 0), None);
        assert_eq!(abs_index(-1, 0), None);
        assert_eq!(abs_index(i64::MIN, 3), None);
        assert_eq!(abs_index(i64::MAX, 3), None);
    }

    use crate::commands::executor::testing::{bulks, run};

    fn setup() -> (Server, Box<Client>) {
        crate::commands::executor::testing::server_and_client()
    }

    fn range(srv: &mut Server, c: &mut Client, key: &str) -> Vec<String> {
        bulks(&run(srv, c, &["LRANGE", key, "0", "-1"]))
    }

    /// Lists of many segments (two elements each), so the per-segment paths run.
    fn small_segments(srv: &mut Server, c: &mut Client) {
        assert_eq!(
            run(srv, c, &["CONFIG", "SET", "list-max-listpack-size", "2"]),
            "+OK\r\n"
        );
    }

    #[test]
    fn pops_with_and_without_count() {
        let (mut srv, mut c) = setup();
        let c = &mut *c;
        assert_eq!(run(&mut srv, c, &["LPOP", "k"]), "$-1\r\n");
        assert_eq!(run(&mut srv, c, &["LPOP", "k", "2"]), "*-1\r\n");
        run(&mut srv, c, &["RPUSH", "k", "a", "b", "c"]);
        assert_eq!(run(&mut srv, c, &["LPOP", "k", "0"]), "*0\r\n");
        assert_eq!(
            run(&mut srv, c, &["LPOP", "k", "-1"]),
            "-ERR value is out of range, must be positive\r\n"
        );
        assert_eq!(
            run(&mut srv, c, &["LPOP", "k", "1", "2"]),
            "-ERR wrong number of arguments for 'lpop' command\r\n"
        );
        assert_eq!(bulks(&run(&mut srv, c, &["RPOP", "k", "2"])), ["c", "b"]);
        assert_eq!(run(&mut srv, c, &["LPOP", "k", "5"]), "*1\r\n$1\r\na\r\n");
        assert_eq!(run(&mut srv, c, &["EXISTS", "k"]), ":0\r\n");
    }

    #[test]
    fn pushx_needs_an_existing_list_and_prepends_in_argument_order() {
        let (mut srv, mut c) = setup();
        let c = &mut *c;
        assert_eq!(run(&mut srv, c, &["LPUSHX", "k", "a"]), ":0\r\n");
        assert_eq!(run(&mut srv, c, &["EXISTS", "k"]), ":0\r\n");
        run(&mut srv, c, &["RPUSH", "k", "a"]);
        assert_eq!(run(&mut srv, c, &["LPUSHX", "k", "b", "c"]), ":3\r\n");
        assert_eq!(run(&mut srv, c, &["RPUSHX", "k", "d"]), ":4\r\n");
        assert_eq!(range(&mut srv, c, "k"), ["c", "b", "a", "d"]);
        run(&mut srv, c, &["SET", "s", "v"]);
        assert!(run(&mut srv, c, &["LPUSH", "s", "x"]).starts_with("-WRONGTYPE"));
    }

    #[test]
    fn lrange_and_ltrim_use_the_same_normalisation() {
        let (mut srv, mut c) = setup();
        let c = &mut *c;
        small_segments(&mut srv, c);
        run(&mut srv, c, &["RPUSH", "k", "1", "2", "3", "4", "5"]);
        assert_eq!(
            bulks(&run(
                &mut srv,
                c,
                &["LRANGE", "k", "-9223372036854775808", "9223372036854775807"]
            )),
            ["1", "2", "3", "4", "5"]
        );
        assert_eq!(run(&mut srv, c, &["LRANGE", "k", "3", "1"]), "*0\r\n");
        assert_eq!(
            bulks(&run(&mut srv, c, &["LRANGE", "k", "1", "2"])),
            ["2", "3"]
        );
        assert_eq!(run(&mut srv, c, &["LTRIM", "k", "1", "-2"]), "+OK\r\n");
        assert_eq!(range(&mut srv, c, "k"), ["2", "3", "4"]);
        assert_eq!(run(&mut srv, c, &["LTRIM", "k", "-1", "-1"]), "+OK\r\n");
        assert_eq!(range(&mut srv, c, "k"), ["4"]);
        // An empty range deletes the key.
        assert_eq!(run(&mut srv, c, &["LTRIM", "k", "5", "10"]), "+OK\r\n");
        assert_eq!(run(&mut srv, c, &["EXISTS", "k"]), ":0\r\n");
        assert_eq!(run(&mut srv, c, &["LTRIM", "nokey", "0", "1"]), "+OK\r\n");
    }

    #[test]
    fn lrem_counts_from_the_head_the_tail_or_all_across_segments() {
        let (mut srv, mut c) = setup();
        let c = &mut *c;
        small_segments(&mut srv, c);
        run(
            &mut srv,
            c,
            &["RPUSH", "k", "a", "x", "a", "x", "a", "x", "a"],
        );
        assert_eq!(run(&mut srv, c, &["LREM", "k", "-2", "a"]), ":2\r\n");
        assert_eq!(range(&mut srv, c, "k"), ["a", "x", "a", "x", "x"]);
        assert_eq!(run(&mut srv, c, &["LREM", "k", "1", "x"]), ":1\r\n");
        assert_eq!(range(&mut srv, c, "k"), ["a", "a", "x", "x"]);
        assert_eq!(run(&mut srv, c, &["LREM", "k", "0", "nope"]), ":0\r\n");
        assert_eq!(run(&mut srv, c, &["LREM", "k", "0", "a"]), ":2\r\n");
        assert_eq!(run(&mut srv, c, &["LREM", "k", "0", "x"]), ":2\r\n");
        assert_eq!(run(&mut srv, c, &["EXISTS", "k"]), ":0\r\n");
    }

    #[test]
    fn lset_linsert_lindex_reach_every_segment() {
        let (mut srv, mut c) = setup();
        let c = &mut *c;
        small_segments(&mut srv, c);
        let digits: Vec<String> = (0..10).map(|i| i.to_string()).collect();
        let mut push = vec!["RPUSH", "k"];
        push.extend(digits.iter().map(String::as_str));
        run(&mut srv, c, &push);
        assert_eq!(run(&mut srv, c, &["LSET", "k", "-1", "nine"]), "+OK\r\n");
        assert_eq!(run(&mut srv, c, &["LINDEX", "k", "9"]), "$4\r\nnine\r\n");
        assert_eq!(run(&mut srv, c, &["LINDEX", "k", "-10"]), "$1\r\n0\r\n");
        assert_eq!(run(&mut srv, c, &["LINDEX", "k", "10"]), "$-1\r\n");
        assert_eq!(
            run(&mut srv, c, &["LSET", "k", "10", "x"]),
            "-ERR index out of range\r\n"
        );
        assert_eq!(
            run(&mut srv, c, &["LSET", "nokey", "0", "x"]),
            "-ERR no such key\r\n"
        );
        assert_eq!(
            run(&mut srv, c, &["LINSERT", "k", "BEFORE", "5", "x"]),
            ":11\r\n"
        );
        assert_eq!(
            run(&mut srv, c, &["LINSERT", "k", "after", "nine", "y"]),
            ":12\r\n"
        );
        assert_eq!(
            bulks(&run(&mut srv, c, &["LRANGE", "k", "4", "6"])),
            ["4", "x", "5"]
        );
        assert_eq!(run(&mut srv, c, &["LINDEX", "k", "-1"]), "$1\r\ny\r\n");
        assert_eq!(
            run(&mut srv, c, &["LINSERT", "k", "AFTER", "nope", "z"]),
            ":-1\r\n"
        );
        assert_eq!(
            run(&mut srv, c, &["LINSERT", "nokey", "AFTER", "a", "z"]),
            ":0\r\n"
        );
        assert_eq!(
            run(&mut srv, c, &["LINSERT", "k", "MIDDLE", "5", "z"]),
            "-ERR syntax error\r\n"
        );
        assert_eq!(run(&mut srv, c, &["LLEN", "k"]), ":12\r\n");
    }

    #[test]
    fn lpos_rank_count_and_maxlen() {
        let (mut srv, mut c) = setup();
        let c = &mut *c;
        small_segments(&mut srv, c);
        run(&mut srv, c, &["RPUSH", "k", "a", "b", "a", "c", "a"]);
        fn lpos(srv: &mut Server, c: &mut Client, extra: &[&str]) -> String {
            let mut a = vec!["LPOS", "k", "a"];
            a.extend_from_slice(extra);
            run(srv, c, &a)
        }
        assert_eq!(lpos(&mut srv, c, &[]), ":0\r\n");
        assert_eq!(lpos(&mut srv, c, &["RANK", "2"]), ":2\r\n");
        assert_eq!(lpos(&mut srv, c, &["RANK", "-1"]), ":4\r\n");
        assert_eq!(lpos(&mut srv, c, &["RANK", "4"]), "$-1\r\n");
        assert_eq!(
            lpos(&mut srv, c, &["COUNT", "0"]),
            "*3\r\n:0\r\n:2\r\n:4\r\n"
        );
        assert_eq!(
            lpos(&mut srv, c, &["COUNT", "2", "RANK", "-1"]),
            "*2\r\n:4\r\n:2\r\n"
        );
        assert_eq!(
            lpos(&mut srv, c, &["COUNT", "0", "MAXLEN", "2"]),
            "*1\r\n:0\r\n"
        );
        assert_eq!(
            lpos(&mut srv, c, &["COUNT", "0", "RANK", "-1", "MAXLEN", "1"]),
            "*1\r\n:4\r\n"
        );
        // Redis 7.0's RANK LONG_MIN: the first match from the tail, and COUNT means all.
        assert_eq!(
            lpos(&mut srv, c, &["RANK", "-9223372036854775808"]),
            ":4\r\n"
        );
        assert_eq!(
            lpos(&mut srv, c, &["RANK", "-9223372036854775808", "COUNT", "1"]),
            "*3\r\n:4\r\n:2\r\n:0\r\n"
        );
        assert!(lpos(&mut srv, c, &["RANK", "0"]).starts_with("-ERR RANK can't be zero"));
        assert_eq!(
            lpos(&mut srv, c, &["COUNT", "-1"]),
            "-ERR COUNT can't be negative\r\n"
        );
        assert_eq!(
            lpos(&mut srv, c, &["MAXLEN", "-1"]),
            "-ERR MAXLEN can't be negative\r\n"
        );
        assert_eq!(lpos(&mut srv, c, &["COUNT"]), "-ERR syntax error\r\n");
        assert_eq!(run(&mut srv, c, &["LPOS", "k", "z"]), "$-1\r\n");
        assert_eq!(
            run(&mut srv, c, &["LPOS", "nokey", "a", "COUNT", "1"]),
            "*0\r\n"
        );
    }

    #[test]
    fn lmove_onto_itself_and_type_checks_before_popping() {
        let (mut srv, mut c) = setup();
        let c = &mut *c;
        run(&mut srv, c, &["RPUSH", "k", "a", "b", "c"]);
        assert_eq!(
            run(&mut srv, c, &["LMOVE", "k", "k", "LEFT", "RIGHT"]),
            "$1\r\na\r\n"
        );
        assert_eq!(range(&mut srv, c, "k"), ["b", "c", "a"]);
        // The last element onto its own list: the key is emptied, then filled again.
        run(&mut srv, c, &["RPUSH", "one", "x"]);
        assert_eq!(
            run(&mut srv, c, &["LMOVE", "one", "one", "RIGHT", "LEFT"]),
            "$1\r\nx\r\n"
        );
        assert_eq!(range(&mut srv, c, "one"), ["x"]);
        run(&mut srv, c, &["SET", "s", "v"]);
        assert!(run(&mut srv, c, &["LMOVE", "k", "s", "LEFT", "LEFT"]).starts_with("-WRONGTYPE"));
        assert_eq!(range(&mut srv, c, "k"), ["b", "c", "a"], "nothing popped");
        assert_eq!(
            run(&mut srv, c, &["LMOVE", "k", "d", "UP", "LEFT"]),
            "-ERR syntax error\r\n"
        );
        assert_eq!(run(&mut srv, c, &["RPOPLPUSH", "nokey", "d"]), "$-1\r\n");
        assert_eq!(run(&mut srv, c, &["EXISTS", "d"]), ":0\r\n");
        assert_eq!(run(&mut srv, c, &["RPOPLPUSH", "k", "d"]), "$1\r\na\r\n");
        assert_eq!(range(&mut srv, c, "d"), ["a"]);
    }

    #[test]
    fn lmpop_and_blmpop_argument_rules() {
        let (mut srv, mut c) = setup();
        let c = &mut *c;
        assert_eq!(
            run(&mut srv, c, &["LMPOP", "0", "k", "LEFT"]),
            "-ERR numkeys should be greater than 0\r\n"
        );
        assert_eq!(
            run(&mut srv, c, &["LMPOP", "2", "k", "LEFT"]),
            "-ERR syntax error\r\n"
        );
        assert_eq!(
            run(&mut srv, c, &["LMPOP", "1", "k", "LEFT", "COUNT", "0"]),
            "-ERR count should be greater than 0\r\n"
        );
        assert_eq!(
            run(
                &mut srv,
                c,
                &["LMPOP", "1", "k", "LEFT", "COUNT", "1", "COUNT", "2"]
            ),
            "-ERR syntax error\r\n"
        );
        assert_eq!(run(&mut srv, c, &["LMPOP", "1", "k", "LEFT"]), "*-1\r\n");
        run(&mut srv, c, &["RPUSH", "k", "a", "b", "c"]);
        assert_eq!(
            run(
                &mut srv,
                c,
                &["LMPOP", "2", "nokey", "k", "RIGHT", "COUNT", "2"]
            ),
            "*2\r\n$1\r\nk\r\n*2\r\n$1\r\nc\r\n$1\r\nb\r\n"
        );
        // BLMPOP checks its timeout after the other arguments.
        assert_eq!(
            run(&mut srv, c, &["BLMPOP", "x", "1", "k", "UP"]),
            "-ERR syntax error\r\n"
        );
        assert_eq!(
            run(&mut srv, c, &["BLMPOP", "x", "1", "k", "LEFT"]),
            "-ERR timeout is not a float or out of range\r\n"
        );
        assert_eq!(
            run(
                &mut srv,
                c,
                &["BLMPOP", "0", "1", "k", "LEFT", "COUNT", "9"]
            ),
            "*2\r\n$1\r\nk\r\n*1\r\n$1\r\na\r\n"
        );
        assert_eq!(run(&mut srv, c, &["EXISTS", "k"]), ":0\r\n");
    }
}
