//! SORT and SORT_RO (Redis's `sort.c`) over lists, sets and sorted sets: numeric or ALPHA
//! order, BY patterns (`*` replaced by the element, `->field` reads a hash field; a
//! pattern without `*` means no sorting), GET patterns (`#` is the element itself),
//! LIMIT, ASC/DESC, and STORE into a list.
//!
//! Ties keep Redis's order because the same algorithms move the elements (`sort_algo`:
//! glibc's merge sort, or Redis's partial quicksort when BY and LIMIT are both given).
//! Where Redis's input order is its hash table's (sets other than intsets, sorted sets
//! walked through their dict), the order is unspecified in Redis; cairn feeds sets in
//! byte order and sorted sets in score order, so a result is a function of the data
//! (a logged SORT ... STORE replays to the same list).
//!
//! BY and GET read keys the command does not name: the log's read barrier treats such a
//! SORT like KEYS (`propagate::reads_unnamed_keys`).

use super::notify::{notify, NOTIFY_GENERIC, NOTIFY_LIST};
use super::sort_algo::{merge_sort, partial_qsort};
use super::{CmdError, CmdResult, CommandSpec, Ctx, DENYOOM, READONLY, WRITE};
use crate::collections::listpack::Val;
use crate::collections::{hash, list, set, zset};
use crate::keyspace::{Kind, Ttl};
use std::cmp::Ordering;

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new("sort", -2, WRITE | DENYOOM, "generic", sort).acl(super::acl::SET | super::acl::SORTEDSET | super::acl::LIST | super::acl::DANGEROUS).keys(1, 1, 1).doc("Sort the elements in a list, set or sorted set", "1.0.0"),
    CommandSpec::new("sort_ro", -2, READONLY, "generic", sort_ro).acl(super::acl::SET | super::acl::SORTEDSET | super::acl::LIST | super::acl::DANGEROUS).keys(1, 1, 1).doc("Sort the elements in a list, set or sorted set. Read-only variant of SORT.", "7.0.0"),
];

fn sort(ctx: &mut Ctx) -> CmdResult {
    sort_generic(ctx, false)
}
fn sort_ro(ctx: &mut Ctx) -> CmdResult {
    sort_generic(ctx, true)
}

/// The bytes a C string function sees: up to the first NUL.
fn cstr(b: &[u8]) -> &[u8] {
    match b.iter().position(|&c| c == 0) {
        Some(i) => &b[..i],
        None => b,
    }
}

/// `strtod(s, &end)` where the whole C string must be consumed, without ERANGE or NaN:
/// how SORT reads a weight. An empty string is 0 (nothing to convert, nothing left).
fn sort_weight(b: &[u8]) -> Option<f64> {
    let s = cstr(b);
    if s.is_empty() {
        return Some(0.0);
    }
    let body = s.trim_ascii_start();
    // C's isspace also counts the vertical tab.
    let body = match body
        .iter()
        .position(|&c| c != 0x0b && !c.is_ascii_whitespace())
    {
        Some(i) => &body[i..],
        None => return None,
    };
    super::zsets::parse_score(body)
}

/// Redis's lookupKeyByPattern: the value a BY or GET pattern names for `subst`.
fn lookup_pattern(ctx: &mut Ctx, pat: &[u8], subst: &[u8]) -> Option<Vec<u8>> {
    if pat.first() == Some(&b'#') && (pat.len() == 1 || pat[1] == 0) {
        return Some(subst.to_vec());
    }
    let c = cstr(pat);
    let star = c.iter().position(|&b| b == b'*')?;
    // "->" after the star, followed by at least one byte, names a hash field (the rest of
    // the pattern, NULs included, as Redis takes the field by length).
    let field_at = c[star + 1..]
        .windows(2)
        .position(|w| w == b"->")
        .map(|i| star + 1 + i)
        .filter(|&f| f + 2 < c.len());
    let key_end = field_at.unwrap_or(pat.len());
    let mut key = Vec::with_capacity(star + subst.len() + (key_end - star - 1));
    key.extend_from_slice(&pat[..star]);
    key.extend_from_slice(subst);
    key.extend_from_slice(&pat[star + 1..key_end]);
    let db = ctx.db();
    let e = ctx.srv.ks.lookup_read(db, &key, ctx.now_ms)?;
    let ks = &ctx.srv.ks;
    match field_at {
        Some(f) => {
            if ks.kind(e) != Kind::Hash {
                return None;
            }
            hash::get(ks, e, &pat[f + 2..]).map(|v| v.to_vec())
        }
        None => {
            if ks.kind(e) != Kind::String {
                return None;
            }
            Some(ks.value(e).to_vec())
        }
    }
}

struct Item {
    obj: Vec<u8>,
    score: f64,
    /// The BY value under ALPHA (None: its key or field is missing).
    by: Option<Vec<u8>>,
}

fn val_vec(v: Val) -> Vec<u8> {
    v.to_vec()
}

fn sort_generic(ctx: &mut Ctx, readonly: bool) -> CmdResult {
    let argc = ctx.args.len();
    let (mut desc, mut alpha, mut dontsort) = (false, false, false);
    let (mut limit_start, mut limit_count): (i64, i64) = (0, -1);
    let mut sortby: Option<usize> = None;
    let mut store: Option<usize> = None;
    let mut gets: Vec<usize> = Vec::new();
    let mut j = 2;
    while j < argc {
        let left = argc - j - 1;
        if ctx.args.is(j, "asc") {
            desc = false;
        } else if ctx.args.is(j, "desc") {
            desc = true;
        } else if ctx.args.is(j, "alpha") {
            alpha = true;
        } else if ctx.args.is(j, "limit") && left >= 2 {
            limit_start = ctx.args.i64(j + 1)?;
            limit_count = ctx.args.i64(j + 2)?;
            j += 2;
        } else if !readonly && ctx.args.is(j, "store") && left >= 1 {
            store = Some(j + 1);
            j += 1;
        } else if ctx.args.is(j, "by") && left >= 1 {
            sortby = Some(j + 1);
            if !cstr(ctx.args.get(j + 1)).contains(&b'*') {
                dontsort = true;
            }
            j += 1;
        } else if ctx.args.is(j, "get") && left >= 1 {
            gets.push(j + 1);
            j += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    let db = ctx.db();
    let key = ctx.args.get(1);
    let found = ctx.srv.ks.lookup_read(db, key, ctx.now_ms);
    let kind = match found {
        Some(e) => {
            let k = ctx.srv.ks.kind(e);
            if !matches!(k, Kind::List | Kind::Set | Kind::ZSet) {
                return Err(CmdError::WrongType);
            }
            k
        }
        None => Kind::List,
    };
    if dontsort && kind == Kind::Set && (store.is_some() || ctx.srv.in_script_call) {
        // Keep the output deterministic where it is stored or replicated.
        dontsort = false;
        alpha = true;
        sortby = None;
    }
    let mut e = found;
    if let Some(z) = e.filter(|_| kind == Kind::ZSet) {
        // Redis converts a sorted set it sorts to a skiplist, for good. Only an encoding:
        // skipped when the arena has no room to spare (SORT_RO is admitted as a read).
        let pairs = zset::listpack(&ctx.srv.ks, z).map(|_| zset::all(&ctx.srv.ks, z));
        let bytes: u64 = pairs
            .iter()
            .flatten()
            .map(|(m, _)| m.len() as u64 + 96)
            .sum();
        let srv = &*ctx.srv;
        let room = srv.arena_admits(srv.arena_reserve_bytes() / 2, bytes);
        if let Some(pairs) = pairs.filter(|_| room) {
            let lim = zset::Limits {
                max_entries: 0,
                max_value: 0,
            };
            e = zset::create_from(&mut ctx.srv.ks, db, key, pairs, Ttl::Keep, lim);
        }
    }
    let ks = &ctx.srv.ks;
    let total: i64 = match (e, kind) {
        (None, _) => 0,
        (Some(e), Kind::List) => list::len(ks, e) as i64,
        (Some(e), Kind::Set) => set::len(ks, e) as i64,
        (Some(e), _) => zset::len(ks, e) as i64,
    };
    let mut vectorlen = total;
    let mut start = limit_start.max(0).min(vectorlen);
    let limit_count = limit_count.max(-1).min(vectorlen);
    let mut end = if limit_count < 0 {
        vectorlen - 1
    } else {
        start + limit_count - 1
    };
    if start >= vectorlen {
        start = vectorlen - 1;
        end = vectorlen - 2;
    }
    if end >= vectorlen {
        end = vectorlen - 1;
    }
    if matches!(kind, Kind::ZSet | Kind::List) && dontsort && (start != 0 || end != vectorlen - 1) {
        vectorlen = end - start + 1;
    }
    let mut objs: Vec<Vec<u8>> = Vec::with_capacity(vectorlen.clamp(0, 1 << 16) as usize);
    if let Some(e) = e {
        match kind {
            Kind::List if dontsort => {
                if end >= start {
                    let from = if desc { total - start - 1 } else { start };
                    let want = vectorlen.max(0) as usize;
                    list::walk(ks, e, from as u64, desc, |v| {
                        objs.push(val_vec(v));
                        objs.len() < want
                    });
                    end -= start;
                    start = 0;
                }
            }
            Kind::List => {
                if total > 0 {
                    list::walk(ks, e, 0, false, |v| {
                        objs.push(val_vec(v));
                        true
                    });
                }
            }
            Kind::Set => {
                let intset = matches!(set::encoded(ks, e), set::Encoded::Intset(_));
                set::for_each(ks, e, |v| objs.push(val_vec(v)));
                if !intset {
                    objs.sort();
                }
            }
            _ if dontsort => {
                let want = vectorlen.max(0) as u64;
                if want > 0 {
                    let from = if desc { total - start - 1 } else { start };
                    let mut n = 0;
                    zset::walk(ks, e, from as u64, desc, |m, _| {
                        objs.push(m.to_vec());
                        n += 1;
                        n < want
                    });
                }
                end -= start;
                start = 0;
            }
            _ => {
                zset::walk(ks, e, 0, false, |m, _| {
                    objs.push(m.to_vec());
                    true
                });
            }
        }
    }
    let mut items: Vec<Item> = objs
        .into_iter()
        .map(|obj| Item {
            obj,
            score: 0.0,
            by: None,
        })
        .collect();
    let mut conversion_error = false;
    let mut order: Vec<usize> = (0..items.len()).collect();
    if !dontsort {
        let by_pat = sortby.map(|i| ctx.args.get(i));
        for it in items.iter_mut() {
            let byval = match by_pat {
                Some(p) => match lookup_pattern(ctx, p, &it.obj) {
                    Some(v) => v,
                    None => continue,
                },
                None => {
                    if !alpha {
                        match sort_weight(&it.obj) {
                            Some(s) => it.score = s,
                            None => conversion_error = true,
                        }
                    }
                    continue;
                }
            };
            if alpha {
                it.by = Some(byval);
            } else {
                match sort_weight(&byval) {
                    Some(s) => it.score = s,
                    None => conversion_error = true,
                }
            }
        }
        let bypattern = by_pat.is_some();
        let storing = store.is_some();
        let mut cmp = |a: &usize, b: &usize| -> Ordering {
            let (x, y) = (&items[*a], &items[*b]);
            let c = if !alpha {
                if x.score > y.score {
                    Ordering::Greater
                } else if x.score < y.score {
                    Ordering::Less
                } else {
                    x.obj.cmp(&y.obj)
                }
            } else if bypattern {
                match (&x.by, &y.by) {
                    (None, None) => Ordering::Equal,
                    (None, Some(_)) => Ordering::Less,
                    (Some(_), None) => Ordering::Greater,
                    (Some(p), Some(q)) if storing => p.cmp(q),
                    (Some(p), Some(q)) => cstr(p).cmp(cstr(q)),
                }
            } else if storing {
                x.obj.cmp(&y.obj)
            } else {
                cstr(&x.obj).cmp(cstr(&y.obj))
            };
            if desc {
                c.reverse()
            } else {
                c
            }
        };
        let n = order.len() as i64;
        if bypattern && (start != 0 || end != n - 1) {
            partial_qsort(&mut order, start, end, &mut cmp);
        } else {
            merge_sort(&mut order, &mut cmp);
        }
    }
    let rows = (end - start + 1).max(0) as usize;
    let outputlen = if gets.is_empty() {
        rows
    } else {
        gets.len() * rows
    };
    if conversion_error {
        return Err(CmdError::err(
            "One or more scores can't be converted into double",
        ));
    }
    let picked = order.iter().skip(start.max(0) as usize).take(rows);
    match store {
        None => {
            ctx.out.array(outputlen);
            for &i in picked {
                if gets.is_empty() {
                    ctx.out.bulk(&items[i].obj);
                }
                for &g in &gets {
                    let pat = ctx.args.get(g);
                    match lookup_pattern(ctx, pat, &items[i].obj) {
                        Some(v) => ctx.out.bulk(&v),
                        None => ctx.out.null(),
                    }
                }
            }
        }
        Some(s) => {
            let mut out: Vec<Vec<u8>> = Vec::with_capacity(outputlen.min(1 << 16));
            for &i in picked {
                if gets.is_empty() {
                    out.push(items[i].obj.clone());
                }
                for &g in &gets {
                    let pat = ctx.args.get(g);
                    out.push(lookup_pattern(ctx, pat, &items[i].obj).unwrap_or_default());
                }
            }
            let dst = ctx.args.get(s);
            if outputlen > 0 {
                let bytes: u64 = out.iter().map(|v| v.len() as u64 + 11).sum();
                ctx.ensure_arena_room(bytes)?;
                let fill = list::Fill::from_config(&ctx.srv.config);
                // An expired destination fires `expired` before it is replaced, as
                // Redis's setKey looks it up first.
                ctx.srv.ks.find(db, dst, ctx.now_ms);
                let mut e = list::create(&mut ctx.srv.ks, db, dst);
                for v in &out {
                    e = list::push(&mut ctx.srv.ks, db, e, v, false, fill);
                }
                ctx.dirty(outputlen as u64);
                notify(ctx, NOTIFY_LIST, "sortstore", dst);
            } else if ctx.srv.ks.delete_no_lookup(db, dst) {
                ctx.dirty(1);
                notify(ctx, NOTIFY_GENERIC, "del", dst);
            }
            ctx.out.int(outputlen as i64);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_read_as_strtod() {
        assert_eq!(sort_weight(b""), Some(0.0));
        assert_eq!(sort_weight(b"  12"), Some(12.0));
        assert_eq!(sort_weight(b"12\0junk"), Some(12.0));
        assert_eq!(sort_weight(b"   "), None);
        assert_eq!(sort_weight(b"12 "), None);
        assert_eq!(sort_weight(b"nan"), None);
        assert_eq!(sort_weight(b"1e400"), None);
        assert_eq!(sort_weight(b"-inf"), Some(f64::NEG_INFINITY));
    }
}
