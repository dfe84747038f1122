//! Sorted-set commands (Redis's `t_zset.c`), over the arena zsets of
//! `crate::collections::zset`.
//!
//! Every score and lex range is turned into an interval of 0-based ranks with
//! [`zset::count_prefix`] (O(log n) on a skiplist), so ZRANGEBYSCORE, ZCOUNT, ZLEXCOUNT,
//! ZREMRANGEBY* and the pops share one code path per encoding.
//!
//! BZPOPMIN, BZPOPMAX and BZMPOP parse and serve at once in [`bzpop_ready`]; otherwise
//! they park the client (`src/commands/executor/blocking.rs`) and a served pop is logged as
//! ZPOPMIN/ZPOPMAX.

use super::notify::{notify, NOTIFY_GENERIC, NOTIFY_ZSET};
use super::{
    CmdError, CmdResult, CommandSpec, Ctx, BLOCKING, DENYOOM, FAST, NOSCRIPT, READONLY, WRITE,
};
use crate::arena::Ref;
use crate::collections::zset::{self, AddFlags, AddOut, Limits, Pairs};
use crate::commands::executor::blocking::{self, TimeoutReply};
use crate::keyspace::{Kind, Ttl};
use crate::protocol::reply::{Reply, Resp};
use crate::util::{glob_match, parse_i64};

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new("zadd", -4, WRITE | DENYOOM | FAST, "sorted-set", zadd).keys(1, 1, 1).doc("Adds one or more members to a sorted set, or updates their scores. Creates the key if it doesn't exist.", "1.2.0"),
    CommandSpec::new("zincrby", 4, WRITE | DENYOOM | FAST, "sorted-set", zincrby).keys(1, 1, 1).doc("Increments the score of a member in a sorted set.", "1.2.0"),
    CommandSpec::new("zrem", -3, WRITE | FAST, "sorted-set", zrem).keys(1, 1, 1).doc("Removes one or more members from a sorted set. Deletes the sorted set if all members were removed.", "1.2.0"),
    CommandSpec::new("zcard", 2, READONLY | FAST, "sorted-set", zcard).keys(1, 1, 1).doc("Returns the number of members in a sorted set.", "1.2.0"),
    CommandSpec::new("zcount", 4, READONLY | FAST, "sorted-set", zcount).keys(1, 1, 1).doc("Returns the count of members in a sorted set that have scores within a range.", "2.0.0"),
    CommandSpec::new("zlexcount", 4, READONLY | FAST, "sorted-set", zlexcount).keys(1, 1, 1).doc("Returns the number of members in a sorted set within a lexicographical range.", "2.8.9"),
    CommandSpec::new("zscore", 3, READONLY | FAST, "sorted-set", zscore).keys(1, 1, 1).doc("Returns the score of a member in a sorted set.", "1.2.0"),
    CommandSpec::new("zmscore", -3, READONLY | FAST, "sorted-set", zmscore).keys(1, 1, 1).doc("Returns the score of one or more members in a sorted set.", "6.2.0"),
    CommandSpec::new("zrank", 3, READONLY | FAST, "sorted-set", zrank).keys(1, 1, 1).doc("Returns the index of a member in a sorted set ordered by ascending scores.", "2.0.0"),
    CommandSpec::new("zrevrank", 3, READONLY | FAST, "sorted-set", zrevrank).keys(1, 1, 1).doc("Returns the index of a member in a sorted set ordered by descending scores.", "2.0.0"),
    CommandSpec::new("zrange", -4, READONLY, "sorted-set", zrange).keys(1, 1, 1).doc("Returns members in a sorted set within a range of indexes.", "1.2.0"),
    CommandSpec::new("zrangestore", -5, WRITE | DENYOOM, "sorted-set", zrangestore).keys(1, 2, 1).doc("Stores a range of members from sorted set in a key.", "6.2.0"),
    CommandSpec::new("zrevrange", -4, READONLY, "sorted-set", zrevrange).keys(1, 1, 1).doc("Returns members in a sorted set within a range of indexes in reverse order.", "1.2.0"),
    CommandSpec::new("zrangebyscore", -4, READONLY, "sorted-set", zrangebyscore).keys(1, 1, 1).doc("Returns members in a sorted set within a range of scores.", "1.0.5"),
    CommandSpec::new("zrevrangebyscore", -4, READONLY, "sorted-set", zrevrangebyscore).keys(1, 1, 1).doc("Returns members in a sorted set within a range of scores in reverse order.", "2.2.0"),
    CommandSpec::new("zrangebylex", -4, READONLY, "sorted-set", zrangebylex).keys(1, 1, 1).doc("Returns members in a sorted set within a lexicographical range.", "2.8.9"),
    CommandSpec::new("zrevrangebylex", -4, READONLY, "sorted-set", zrevrangebylex).keys(1, 1, 1).doc("Returns members in a sorted set within a lexicographical range in reverse order.", "2.8.9"),
    CommandSpec::new("zremrangebyrank", 4, WRITE, "sorted-set", zremrangebyrank).keys(1, 1, 1).doc("Removes members in a sorted set within a range of indexes. Deletes the sorted set if all members were removed.", "2.0.0"),
    CommandSpec::new("zremrangebyscore", 4, WRITE, "sorted-set", zremrangebyscore).keys(1, 1, 1).doc("Removes members in a sorted set within a range of scores. Deletes the sorted set if all members were removed.", "1.2.0"),
    CommandSpec::new("zremrangebylex", 4, WRITE, "sorted-set", zremrangebylex).keys(1, 1, 1).doc("Removes members in a sorted set within a lexicographical range. Deletes the sorted set if all members were removed.", "2.8.9"),
    CommandSpec::new("zpopmin", -2, WRITE | FAST, "sorted-set", zpopmin).keys(1, 1, 1).doc("Returns the lowest-scoring members from a sorted set after removing them. Deletes the sorted set if the last member was popped.", "5.0.0"),
    CommandSpec::new("zpopmax", -2, WRITE | FAST, "sorted-set", zpopmax).keys(1, 1, 1).doc("Returns the highest-scoring members from a sorted set after removing them. Deletes the sorted set if the last member was popped.", "5.0.0"),
    CommandSpec::new("zmpop", -4, WRITE, "sorted-set", zmpop).doc("Returns the highest- or lowest-scoring members from one or more sorted sets after removing them. Deletes the sorted set if the last member was popped.", "7.0.0"),
    CommandSpec::new("bzpopmin", -3, WRITE | NOSCRIPT | BLOCKING | FAST, "sorted-set", bzpopmin).keys(1, -2, 1).doc("Removes and returns the member with the lowest score from one or more sorted sets. Blocks until a member is available otherwise. Deletes the sorted set if the last element was popped.", "5.0.0"),
    CommandSpec::new("bzpopmax", -3, WRITE | NOSCRIPT | BLOCKING | FAST, "sorted-set", bzpopmax).keys(1, -2, 1).doc("Removes and returns the member with the highest score from one or more sorted sets. Blocks until a member available otherwise.  Deletes the sorted set if the last element was popped.", "5.0.0"),
    CommandSpec::new("bzmpop", -5, WRITE | BLOCKING, "sorted-set", bzmpop).doc("Removes and returns a member by score from one or more sorted sets. Blocks until a member is available otherwise. Deletes the sorted set if the last element was popped.", "7.0.0"),
    CommandSpec::new("zrandmember", -2, READONLY, "sorted-set", zrandmember).keys(1, 1, 1).doc("Returns one or more random members from a sorted set.", "6.2.0"),
    CommandSpec::new("zunion", -3, READONLY, "sorted-set", zunion).doc("Returns the union of multiple sorted sets.", "6.2.0"),
    CommandSpec::new("zinter", -3, READONLY, "sorted-set", zinter).doc("Returns the intersect of multiple sorted sets.", "6.2.0"),
    CommandSpec::new("zdiff", -3, READONLY, "sorted-set", zdiff).doc("Returns the difference between multiple sorted sets.", "6.2.0"),
    CommandSpec::new("zunionstore", -4, WRITE | DENYOOM, "sorted-set", zunionstore).keys(1, 1, 1).doc("Stores the union of multiple sorted sets in a key.", "2.0.0"),
    CommandSpec::new("zinterstore", -4, WRITE | DENYOOM, "sorted-set", zinterstore).keys(1, 1, 1).doc("Stores the intersect of multiple sorted sets in a key.", "2.0.0"),
    CommandSpec::new("zdiffstore", -4, WRITE | DENYOOM, "sorted-set", zdiffstore).keys(1, 1, 1).doc("Stores the difference of multiple sorted sets in a key.", "6.2.0"),
    CommandSpec::new("zintercard", -3, READONLY, "sorted-set", zintercard).doc("Returns the number of members of the intersect of multiple sorted sets.", "7.0.0"),
    CommandSpec::new("zscan", -3, READONLY, "sorted-set", zscan).keys(1, 1, 1).doc("Iterates over members and scores of a sorted set.", "2.8.0"),
];

fn check(ctx: &Ctx, e: Option<Ref>) -> Result<Option<Ref>, CmdError> {
    super::of_kind(ctx, e, Kind::ZSet)
}
fn read_zset(ctx: &mut Ctx, key: &[u8]) -> Result<Option<Ref>, CmdError> {
    let e = ctx.srv.ks.lookup_read(ctx.client.db, key, ctx.now_ms);
    check(ctx, e)
}
fn write_zset(ctx: &mut Ctx, key: &[u8]) -> Result<Option<Ref>, CmdError> {
    let e = ctx.srv.ks.lookup_write(ctx.client.db, key, ctx.now_ms);
    check(ctx, e)
}
fn limits(ctx: &Ctx) -> Limits {
    Limits::from_config(&ctx.srv.config)
}
/// Deletes the key if its zset became empty; `notify_del`: with its `del` notification
/// (not for the key ZADD created and did not fill, which Redis never creates).
fn delete_if_empty(ctx: &mut Ctx, key: &[u8], e: Ref, notify_del: bool) {
    if zset::len(&ctx.srv.ks, e) == 0 {
        ctx.srv.ks.delete_entry(ctx.client.db, e);
        if notify_del {
            notify(ctx, NOTIFY_GENERIC, "del", key);
        }
    }
}
fn resp3(ctx: &Ctx) -> bool {
    ctx.client.resp == Resp::V3
}

// ---- argument parsing ------------------------------------------------------------------------

/// Redis's getDoubleFromObject: a whole-string `strtod` with no leading space, no NaN,
/// and no overflow to ±inf or underflow to 0 (ERANGE) unless written as such.
pub fn parse_score(s: &[u8]) -> Option<f64> {
    if s.is_empty() || s[0].is_ascii_whitespace() {
        return None;
    }
    if let Some(i) = parse_i64(s) {
        // The common case, without float parsing (i64 -> f64 rounds as strtod does).
        return Some(i as f64);
    }
    let v = strtod_whole(s)?;
    if v.is_nan() {
        return None;
    }
    let body = unsigned(s);
    let literal_inf = body.eq_ignore_ascii_case(b"inf") || body.eq_ignore_ascii_case(b"infinity");
    if v.is_infinite() && !literal_inf {
        return None;
    }
    if v == 0.0 {
        // Underflow: a mantissa with a non-zero digit that came out as zero.
        let mant = body
            .split(|&c| c == b'e' || c == b'E')
            .next()
            .unwrap_or(b"");
        if mant.iter().any(|c| (b'1'..=b'9').contains(c)) {
            return None;
        }
    }
    Some(v)
}

fn unsigned(s: &[u8]) -> &[u8] {
    match s.first() {
        Some(b'+' | b'-') => &s[1..],
        _ => s,
    }
}

/// `strtod` over the whole string (decimal and C99 hex forms, inf/infinity, nan; any case).
fn strtod_whole(s: &[u8]) -> Option<f64> {
    let body = unsigned(s);
    if body.len() > 2 && body[0] == b'0' && (body[1] | 0x20) == b'x' {
        let v = hex_float(&body[2..])?;
        return Some(if s[0] == b'-' { -v } else { v });
    }
    if !s
        .iter()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'-' | b'.'))
    {
        return None;
    }
    let body = unsigned(s);
    if body
        .iter()
        .any(|&c| c.is_ascii_alphabetic() && c != b'e' && c != b'E')
        && !["inf", "infinity", "nan"]
            .iter()
            .any(|w| body.eq_ignore_ascii_case(w.as_bytes()))
    {
        return None;
    }
    std::str::from_utf8(s).ok()?.parse::<f64>().ok()
}

/// The digits of a C99 hex float after `0x`: hex mantissa with an optional point, then an
/// optional `p` binary exponent (strtod accepts these, so Redis does).
fn hex_float(s: &[u8]) -> Option<f64> {
    let (mant, exp) = match s.iter().position(|&c| c | 0x20 == b'p') {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let mut m: u128 = 0;
    let mut shift: i64 = 0;
    let (mut digits, mut seen_point) = (0, false);
    for &c in mant {
        if c == b'.' {
            if seen_point {
                return None;
            }
            seen_point = true;
            continue;
        }
        let d = (c as char).to_digit(16)? as u128;
        digits += 1;
        if m >> 120 == 0 {
            m = (m << 4) | d;
            if seen_point {
                shift -= 4;
            }
        } else if !seen_point {
            // Beyond 30 digits only the magnitude still counts.
            shift += 4;
        }
    }
    if digits == 0 {
        return None;
    }
    let e: i64 = match exp {
        None => 0,
        Some(x) => {
            let (neg, d) = match x.first() {
                Some(b'-') => (true, &x[1..]),
                Some(b'+') => (false, &x[1..]),
                _ => (false, x),
            };
            if d.is_empty() || !d.iter().all(u8::is_ascii_digit) {
                return None;
            }
            let v = std::str::from_utf8(d)
                .ok()?
                .parse::<i64>()
                .unwrap_or(i64::MAX / 4);
            if neg {
                -v
            } else {
                v
            }
        }
    };
    let e = e.saturating_add(shift).clamp(-4000, 4000) as i32;
    // Two steps so an extreme exponent with a large mantissa does not underflow early.
    let half = e / 2;
    Some(m as f64 * 2f64.powi(half) * 2f64.powi(e - half))
}

/// One end of a score range: Redis's zslParseRange (`(` excludes; plain `strtod` whose
/// end must be the string's end, so a leading space, overflow and even an empty string
/// (0) are accepted, NaN is not).
fn parse_range_end(s: &[u8]) -> Option<(f64, bool)> {
    // strtod sees a C string: whatever follows a NUL byte is not looked at.
    let s = s.split(|&c| c == 0).next().unwrap_or(s);
    let (ex, num) = match s.first() {
        Some(b'(') => (true, &s[1..]),
        _ => (false, s),
    };
    if num.is_empty() {
        return Some((0.0, ex));
    }
    let t = num.trim_ascii_start();
    if t.is_empty() {
        return None;
    }
    let v = strtod_whole(t)?;
    if v.is_nan() {
        return None;
    }
    Some((v, ex))
}

#[derive(Clone, Copy)]
struct ScoreRange {
    min: f64,
    max: f64,
    minex: bool,
    maxex: bool,
}

impl ScoreRange {
    fn parse(min: &[u8], max: &[u8]) -> Result<ScoreRange, CmdError> {
        let err = || CmdError::err("min or max is not a float");
        let (min, minex) = parse_range_end(min).ok_or_else(err)?;
        let (max, maxex) = parse_range_end(max).ok_or_else(err)?;
        Ok(ScoreRange {
            min,
            max,
            minex,
            maxex,
        })
    }
    /// Elements before the range (score < min, or <= min when exclusive).
    fn below(&self) -> impl Fn(f64, &[u8]) -> bool + '_ {
        move |s, _| {
            if self.minex {
                s <= self.min
            } else {
                s < self.min
            }
        }
    }
    /// Elements not after the range's end.
    fn upto(&self) -> impl Fn(f64, &[u8]) -> bool + '_ {
        move |s, _| {
            if self.maxex {
                s < self.max
            } else {
                s <= self.max
            }
        }
    }
}

#[derive(Clone)]
enum LexEnd {
    Min,
    Max,
    Incl(Vec<u8>),
    Excl(Vec<u8>),
}

#[derive(Clone)]
struct LexRange {
    min: LexEnd,
    max: LexEnd,
}

impl LexRange {
    fn parse(min: &[u8], max: &[u8]) -> Result<LexRange, CmdError> {
        let item = |s: &[u8]| match s.first() {
            Some(b'+') if s.len() == 1 => Some(LexEnd::Max),
            Some(b'-') if s.len() == 1 => Some(LexEnd::Min),
            Some(b'(') => Some(LexEnd::Excl(s[1..].to_vec())),
            Some(b'[') => Some(LexEnd::Incl(s[1..].to_vec())),
            _ => None,
        };
        let err = || CmdError::err("min or max not valid string range item");
        Ok(LexRange {
            min: item(min).ok_or_else(err)?,
            max: item(max).ok_or_else(err)?,
        })
    }
    fn below(&self) -> impl Fn(f64, &[u8]) -> bool + '_ {
        move |_, m| match &self.min {
            LexEnd::Min => false,
            LexEnd::Max => true,
            LexEnd::Incl(x) => m < &x[..],
            LexEnd::Excl(x) => m <= &x[..],
        }
    }
    fn upto(&self) -> impl Fn(f64, &[u8]) -> bool + '_ {
        move |_, m| match &self.max {
            LexEnd::Min => false,
            LexEnd::Max => true,
            LexEnd::Incl(x) => m <= &x[..],
            LexEnd::Excl(x) => m < &x[..],
        }
    }
}

/// A range as 0-based indices lo..hi (exclusive end).
fn score_span(ctx: &Ctx, e: Ref, r: &ScoreRange) -> (u64, u64) {
    let ks = &ctx.srv.ks;
    let lo = zset::count_prefix(ks, e, &r.below());
    let hi = zset::count_prefix(ks, e, &r.upto());
    (lo, hi.max(lo))
}
fn lex_span(ctx: &Ctx, e: Ref, r: &LexRange) -> (u64, u64) {
    let ks = &ctx.srv.ks;
    let lo = zset::count_prefix(ks, e, &r.below());
    let hi = zset::count_prefix(ks, e, &r.upto());
    (lo, hi.max(lo))
}

/// Redis's rank normalisation: Some(lo, hi) inclusive, or None for an empty range.
fn rank_span(start: i64, end: i64, len: u64) -> Option<(u64, u64)> {
    let llen = len as i64;
    let mut start = if start < 0 {
        llen.saturating_add(start)
    } else {
        start
    };
    let mut end = if end < 0 {
        llen.saturating_add(end)
    } else {
        end
    };
    if start < 0 {
        start = 0;
    }
    if start > end || start >= llen {
        return None;
    }
    if end >= llen {
        end = llen - 1;
    }
    Some((start as u64, end as u64))
}

// ---- replies ---------------------------------------------------------------------------------

/// Elements with or without scores: flat in RESP2, [member, score] pairs in RESP3.
fn reply_pairs(out: &mut Reply, pairs: &[(Vec<u8>, f64)], withscores: bool, resp3: bool) {
    if withscores && !resp3 {
        out.array(pairs.len() * 2);
    } else {
        out.array(pairs.len());
    }
    for (m, s) in pairs {
        if withscores && resp3 {
            out.array(2);
        }
        out.bulk(m);
        if withscores {
            out.double(*s);
        }
    }
}

// ---- ZADD / ZINCRBY / ZREM -----------------------------------------------------------------

fn zadd_generic(ctx: &mut Ctx, incr_cmd: bool) -> CmdResult {
    let key = ctx.args.get(1);
    let mut fl = AddFlags {
        incr: incr_cmd,
        ..Default::default()
    };
    let mut ch = false;
    let mut idx = 2;
    if !incr_cmd {
        while idx < ctx.args.len() {
            let a = ctx.args.get(idx);
            if a.eq_ignore_ascii_case(b"nx") {
                fl.nx = true;
            } else if a.eq_ignore_ascii_case(b"xx") {
                fl.xx = true;
            } else if a.eq_ignore_ascii_case(b"ch") {
                ch = true;
            } else if a.eq_ignore_ascii_case(b"incr") {
                fl.incr = true;
            } else if a.eq_ignore_ascii_case(b"gt") {
                fl.gt = true;
            } else if a.eq_ignore_ascii_case(b"lt") {
                fl.lt = true;
            } else {
                break;
            }
            idx += 1;
        }
    }
    let elems = ctx.args.len() - idx;
    if elems % 2 == 1 || elems == 0 {
        return Err(CmdError::Syntax);
    }
    let n = elems / 2;
    if fl.nx && fl.xx {
        return Err(CmdError::err(
            "XX and NX options at the same time are not compatible",
        ));
    }
    if [fl.gt, fl.lt, fl.nx].iter().filter(|&&x| x).count() > 1 {
        return Err(CmdError::err(
            "GT, LT, and/or NX options at the same time are not compatible",
        ));
    }
    if fl.incr && n > 1 {
        return Err(CmdError::err(
            "INCR option supports a single increment-element pair",
        ));
    }
    // All scores are checked before anything changes (all or nothing).
    let mut scores = Vec::with_capacity(n);
    for j in 0..n {
        scores.push(parse_score(ctx.args.get(idx + 2 * j)).ok_or(CmdError::NotFloat)?);
    }
    let db = ctx.db();
    let lim = limits(ctx);
    let mut e = match write_zset(ctx, key)? {
        Some(e) => e,
        None if fl.xx => {
            if fl.incr {
                ctx.out.null();
            } else {
                ctx.out.int(0);
            }
            return Ok(());
        }
        None => {
            let first = ctx.args.get(idx + 1).len() as u64;
            let skiplist = lim.max_entries == 0 || lim.max_value < first;
            zset::create(&mut ctx.srv.ks, db, key, skiplist)
        }
    };
    let (mut added, mut updated, mut processed) = (0u64, 0u64, 0u64);
    let mut last = 0.0;
    for (j, &sc) in scores.iter().enumerate() {
        let m = ctx.args.get(idx + 2 * j + 1);
        let (ne, out) = zset::add(&mut ctx.srv.ks, db, e, m, sc, fl, lim);
        e = ne;
        match out {
            AddOut::Nan => {
                ctx.dirty(added + updated);
                if added + updated > 0 {
                    notify(
                        ctx,
                        NOTIFY_ZSET,
                        if fl.incr { "zincr" } else { "zadd" },
                        key,
                    );
                }
                delete_if_empty(ctx, key, e, false);
                return Err(CmdError::err("resulting score is not a number (NaN)"));
            }
            AddOut::Added(s) => {
                added += 1;
                processed += 1;
                last = s;
            }
            AddOut::Updated(s) => {
                updated += 1;
                processed += 1;
                last = s;
            }
            AddOut::Same(s) => {
                processed += 1;
                last = s;
            }
            AddOut::Nop => {}
        }
    }
    // A key created for members that were all refused (NX/GT/LT on a new key cannot
    // refuse, but keep the invariant: no empty collections).
    delete_if_empty(ctx, key, e, false);
    ctx.dirty(added + updated);
    if fl.incr {
        if processed > 0 {
            ctx.out.double(last);
        } else {
            ctx.out.null();
        }
    } else {
        ctx.out
            .int((if ch { added + updated } else { added }) as i64);
    }
    if added + updated > 0 {
        notify(
            ctx,
            NOTIFY_ZSET,
            if fl.incr { "zincr" } else { "zadd" },
            key,
        );
    }
    Ok(())
}

fn zadd(ctx: &mut Ctx) -> CmdResult {
    zadd_generic(ctx, false)
}
fn zincrby(ctx: &mut Ctx) -> CmdResult {
    zadd_generic(ctx, true)
}

fn zrem(ctx: &mut Ctx) -> CmdResult {
    let key = ctx.args.get(1);
    let found = write_zset(ctx, key)?;
    super::remove_members(
        ctx,
        (super::notify::NOTIFY_ZSET, "zrem"),
        found,
        zset::remove,
        zset::len,
    )
}

// ---- reads -----------------------------------------------------------------------------------

fn zcard(ctx: &mut Ctx) -> CmdResult {
    let key = ctx.args.get(1);
    let n = match read_zset(ctx, key)? {
        Some(e) => zset::len(&ctx.srv.ks, e),
        None => 0,
    };
    ctx.out.int(n as i64);
    Ok(())
}

fn zcount(ctx: &mut Ctx) -> CmdResult {
    let r = ScoreRange::parse(ctx.args.get(2), ctx.args.get(3))?;
    let key = ctx.args.get(1);
    let n = match read_zset(ctx, key)? {
        Some(e) => {
            let (lo, hi) = score_span(ctx, e, &r);
            hi - lo
        }
        None => 0,
    };
    ctx.out.int(n as i64);
    Ok(())
}

fn zlexcount(ctx: &mut Ctx) -> CmdResult {
    let r = LexRange::parse(ctx.args.get(2), ctx.args.get(3))?;
    let key = ctx.args.get(1);
    let n = match read_zset(ctx, key)? {
        Some(e) => {
            let (lo, hi) = lex_span(ctx, e, &r);
            hi - lo
        }
        None => 0,
    };
    ctx.out.int(n as i64);
    Ok(())
}

fn zscore(ctx: &mut Ctx) -> CmdResult {
    let key = ctx.args.get(1);
    let s = match read_zset(ctx, key)? {
        Some(e) => zset::score(&ctx.srv.ks, e, ctx.args.get(2)),
        None => None,
    };
    match s {
        Some(s) => ctx.out.double(s),
        None => ctx.out.null(),
    }
    Ok(())
}

fn zmscore(ctx: &mut Ctx) -> CmdResult {
    let key = ctx.args.get(1);
    let e = read_zset(ctx, key)?;
    ctx.out.array(ctx.args.len() - 2);
    for i in 2..ctx.args.len() {
        match e.and_then(|e| zset::score(&ctx.srv.ks, e, ctx.args.get(i))) {
            Some(s) => ctx.out.double(s),
            None => ctx.out.null(),
        }
    }
    Ok(())
}

/// ZRANK / ZREVRANK key member (7.0's form: 7.2's WITHSCORE is an arity error here, as
/// in the version cairn reports).
fn zrank_generic(ctx: &mut Ctx, rev: bool) -> CmdResult {
    let key = ctx.args.get(1);
    let found = match read_zset(ctx, key)? {
        Some(e) => zset::rank(&ctx.srv.ks, e, ctx.args.get(2)).map(|(r, _)| {
            if rev {
                zset::len(&ctx.srv.ks, e) - 1 - r
            } else {
                r
            }
        }),
        None => None,
    };
    match found {
        Some(r) => ctx.out.int(r as i64),
        None => ctx.out.null(),
    }
    Ok(())
}
fn zrank(ctx: &mut Ctx) -> CmdResult {
    zrank_generic(ctx, false)
}
fn zrevrank(ctx: &mut Ctx) -> CmdResult {
    zrank_generic(ctx, true)
}

// ---- ZRANGE family ---------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq)]
enum RangeType {
    Auto,
    Rank,
    Score,
    Lex,
}

enum Parsed {
    Rank(i64, i64),
    Score(ScoreRange),
    Lex(LexRange),
}

/// Redis's zrangeGenericCommand. `start` is the index of the source key; `store` the
/// destination for ZRANGESTORE. `rev`: None = not fixed by the command name.
fn zrange_generic(
    ctx: &mut Ctx,
    start: usize,
    store: Option<&[u8]>,
    mut rtype: RangeType,
    rev: Option<bool>,
) -> CmdResult {
    let key = ctx.args.get(start);
    let (mut minidx, mut maxidx) = (start + 1, start + 2);
    let mut withscores = false;
    let mut offset: i64 = 0;
    let mut limit: i64 = -1;
    let mut reverse = rev.unwrap_or(false);
    let mut j = start + 3;
    while j < ctx.args.len() {
        let left = ctx.args.len() - j - 1;
        if store.is_none() && ctx.args.is(j, "WITHSCORES") {
            withscores = true;
        } else if ctx.args.is(j, "LIMIT") && left >= 2 {
            offset = ctx.args.i64(j + 1)?;
            limit = ctx.args.i64(j + 2)?;
            j += 2;
        } else if rev.is_none() && !reverse && ctx.args.is(j, "REV") {
            reverse = true;
        } else if rtype == RangeType::Auto && ctx.args.is(j, "BYLEX") {
            rtype = RangeType::Lex;
        } else if rtype == RangeType::Auto && ctx.args.is(j, "BYSCORE") {
            rtype = RangeType::Score;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    if rtype == RangeType::Auto {
        rtype = RangeType::Rank;
    }
    if limit != -1 && rtype == RangeType::Rank {
        return Err(CmdError::err(
            "syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        ));
    }
    if withscores && rtype == RangeType::Lex {
        return Err(CmdError::err(
            "syntax error, WITHSCORES not supported in combination with BYLEX",
        ));
    }
    if reverse && rtype != RangeType::Rank {
        // The range is given as max, min.
        std::mem::swap(&mut minidx, &mut maxidx);
    }
    let parsed = match rtype {
        RangeType::Score => Parsed::Score(ScoreRange::parse(
            ctx.args.get(minidx),
            ctx.args.get(maxidx),
        )?),
        RangeType::Lex => Parsed::Lex(LexRange::parse(ctx.args.get(minidx), ctx.args.get(maxidx))?),
        _ => Parsed::Rank(ctx.args.i64(minidx)?, ctx.args.i64(maxidx)?),
    };
    let e = read_zset(ctx, key)?;
    let result: Pairs = match e {
        None => vec![],
        Some(e) => {
            let ks = &ctx.srv.ks;
            // Inclusive 0-based interval in ascending order, then offset/limit.
            let span = match &parsed {
                Parsed::Rank(s, t) => {
                    let len = zset::len(ks, e);
                    rank_span(*s, *t, len).map(|(lo, hi)| {
                        if reverse {
                            (len - 1 - hi, len - 1 - lo)
                        } else {
                            (lo, hi)
                        }
                    })
                }
                Parsed::Score(r) => {
                    let (lo, hi) = score_span(ctx, e, r);
                    (hi > lo).then(|| (lo, hi - 1))
                }
                Parsed::Lex(r) => {
                    let (lo, hi) = lex_span(ctx, e, r);
                    (hi > lo).then(|| (lo, hi - 1))
                }
            };
            if matches!(parsed, Parsed::Rank(..)) {
                // Rank ranges ignore LIMIT (it can only be "LIMIT x -1" here).
                offset = 0;
                limit = -1;
            }
            match span {
                None => vec![],
                Some(_) if offset < 0 => vec![],
                Some((lo, hi)) => {
                    let n = hi - lo + 1;
                    let off = (offset as u64).min(n);
                    let take = if limit < 0 {
                        n - off
                    } else {
                        (limit as u64).min(n - off)
                    };
                    if take == 0 {
                        vec![]
                    } else if reverse {
                        zset::range(ks, e, hi + 1 - off - take, hi - off, true)
                    } else {
                        zset::range(ks, e, lo + off, lo + off + take - 1, false)
                    }
                }
            }
        }
    };
    match store {
        Some(dst) => {
            // Redis 7.0 fills the destination through zsetAdd, starting as a listpack
            // unless a rank range is known to be too long; the members added before it
            // converts went through a listpack, which stores -0 as the integer 0.
            let lim = limits(ctx);
            let mut result = result;
            let mut listpack = match parsed {
                Parsed::Rank(..) => result.len() as u64 <= lim.max_entries,
                _ => true,
            };
            for (i, (m, s)) in result.iter_mut().enumerate() {
                if i as u64 + 1 > lim.max_entries || m.len() as u64 > lim.max_value {
                    listpack = false;
                }
                if !listpack {
                    break;
                }
                if *s == 0.0 {
                    *s = 0.0;
                }
            }
            store_result(ctx, dst, result, "zrangestore")?;
        }
        None => {
            let r3 = resp3(ctx);
            reply_pairs(&mut ctx.out, &result, withscores, r3);
        }
    }
    Ok(())
}

/// Writes a store command's result to `dst` (deleting it when empty) and replies with the
/// result's size.
/// `event`: its notification (`zrangestore`, `zunionstore`...).
fn store_result(ctx: &mut Ctx, dst: &[u8], result: Pairs, event: &'static str) -> CmdResult {
    let db = ctx.db();
    let n = result.len();
    let lim = limits(ctx);
    if n == 0 {
        ctx.out.int(0);
        if ctx.srv.ks.delete_no_lookup(db, dst) {
            ctx.dirty(1);
            notify(ctx, NOTIFY_GENERIC, "del", dst);
        }
        return Ok(());
    } else {
        // A skiplist node per member: links, score, span, and the member's bytes.
        let bytes: u64 = result.iter().map(|(m, _)| m.len() as u64 + 64).sum();
        ctx.ensure_arena_room(bytes)?;
        ctx.srv.ks.find(db, dst, ctx.now_ms);
        zset::create_from(&mut ctx.srv.ks, db, dst, result, Ttl::Clear, lim);
        ctx.dirty(1);
    }
    ctx.out.int(n as i64);
    notify(ctx, NOTIFY_ZSET, event, dst);
    Ok(())
}

fn zrange(ctx: &mut Ctx) -> CmdResult {
    zrange_generic(ctx, 1, None, RangeType::Auto, None)
}
fn zrangestore(ctx: &mut Ctx) -> CmdResult {
    let dst = ctx.args.get(1);
    zrange_generic(ctx, 2, Some(dst), RangeType::Auto, None)
}
fn zrevrange(ctx: &mut Ctx) -> CmdResult {
    zrange_generic(ctx, 1, None, RangeType::Rank, Some(true))
}
fn zrangebyscore(ctx: &mut Ctx) -> CmdResult {
    zrange_generic(ctx, 1, None, RangeType::Score, Some(false))
}
fn zrevrangebyscore(ctx: &mut Ctx) -> CmdResult {
    zrange_generic(ctx, 1, None, RangeType::Score, Some(true))
}
fn zrangebylex(ctx: &mut Ctx) -> CmdResult {
    zrange_generic(ctx, 1, None, RangeType::Lex, Some(false))
}
fn zrevrangebylex(ctx: &mut Ctx) -> CmdResult {
    zrange_generic(ctx, 1, None, RangeType::Lex, Some(true))
}

// ---- ZREMRANGEBY* ------------------------------------------------------------------------------

fn zremrange_generic(ctx: &mut Ctx, rtype: RangeType) -> CmdResult {
    let (a1, a2) = (ctx.args.get(2), ctx.args.get(3));
    let parsed = match rtype {
        RangeType::Score => Parsed::Score(ScoreRange::parse(a1, a2)?),
        RangeType::Lex => Parsed::Lex(LexRange::parse(a1, a2)?),
        _ => Parsed::Rank(ctx.args.i64(2)?, ctx.args.i64(3)?),
    };
    let key = ctx.args.get(1);
    let db = ctx.db();
    let Some(e) = write_zset(ctx, key)? else {
        ctx.out.int(0);
        return Ok(());
    };
    let span = match &parsed {
        Parsed::Rank(s, t) => rank_span(*s, *t, zset::len(&ctx.srv.ks, e)),
        Parsed::Score(r) => {
            let (lo, hi) = score_span(ctx, e, r);
            (hi > lo).then(|| (lo, hi - 1))
        }
        Parsed::Lex(r) => {
            let (lo, hi) = lex_span(ctx, e, r);
            (hi > lo).then(|| (lo, hi - 1))
        }
    };
    let Some((lo, hi)) = span else {
        ctx.out.int(0);
        return Ok(());
    };
    let (e, n) = zset::remove_range(&mut ctx.srv.ks, db, e, lo, hi);
    if n > 0 {
        let event = match rtype {
            RangeType::Score => "zremrangebyscore",
            RangeType::Lex => "zremrangebylex",
            _ => "zremrangebyrank",
        };
        notify(ctx, NOTIFY_ZSET, event, key);
    }
    delete_if_empty(ctx, key, e, true);
    ctx.dirty(n);
    ctx.out.int(n as i64);
    Ok(())
}
fn zremrangebyrank(ctx: &mut Ctx) -> CmdResult {
    zremrange_generic(ctx, RangeType::Rank)
}
fn zremrangebyscore(ctx: &mut Ctx) -> CmdResult {
    zremrange_generic(ctx, RangeType::Score)
}
fn zremrangebylex(ctx: &mut Ctx) -> CmdResult {
    zremrange_generic(ctx, RangeType::Lex)
}

// ---- pops ------------------------------------------------------------------------------------

/// Pops up to `count` elements from the min (or max) end of the zset at `e`.
fn pop_n(ctx: &mut Ctx, key: &[u8], e: Ref, max: bool, count: u64) -> Pairs {
    let db = ctx.db();
    let len = zset::len(&ctx.srv.ks, e);
    let n = count.min(len);
    if n == 0 {
        return vec![];
    }
    let (lo, hi) = if max { (len - n, len - 1) } else { (0, n - 1) };
    let items = zset::range(&ctx.srv.ks, e, lo, hi, max);
    let (e, _) = zset::remove_range(&mut ctx.srv.ks, db, e, lo, hi);
    notify(
        ctx,
        NOTIFY_ZSET,
        if max { "zpopmax" } else { "zpopmin" },
        key,
    );
    delete_if_empty(ctx, key, e, true);
    ctx.dirty(n);
    items
}

/// The shape a pop's reply takes (Redis's genericZpopCommand flags).
#[derive(Clone, Copy)]
struct PopReply {
    emit_key: bool,
    nested: bool,
}

fn reply_pop(out: &mut Reply, key: &[u8], items: &[(Vec<u8>, f64)], shape: PopReply) {
    match (shape.nested, shape.emit_key) {
        (false, false) => out.array(items.len() * 2),
        (true, false) => out.array(items.len()),
        (false, true) => {
            out.array(items.len() * 2 + 1);
            out.bulk(key);
        }
        (true, true) => {
            out.array(2);
            out.bulk(key);
            out.array(items.len());
        }
    }
    for (m, s) in items {
        if shape.nested {
            out.array(2);
        }
        out.bulk(m);
        out.double(*s);
    }
}

/// The first non-empty zset among `keys` (type errors stop at the first wrong key), as
/// genericZpopCommand looks them up.
fn first_zset(
    ctx: &mut Ctx,
    keys: std::ops::Range<usize>,
) -> Result<Option<(usize, Ref)>, CmdError> {
    for i in keys {
        let key = ctx.args.get(i);
        if let Some(e) = write_zset(ctx, key)? {
            return Ok(Some((i, e)));
        }
    }
    Ok(None)
}

fn zpop_generic(ctx: &mut Ctx, max: bool) -> CmdResult {
    if ctx.args.len() > 3 {
        return Err(CmdError::Syntax);
    }
    let count = if ctx.args.len() == 3 {
        match parse_i64(ctx.args.get(2)) {
            Some(n) if n >= 0 => Some(n as u64),
            _ => return Err(CmdError::err("value is out of range, must be positive")),
        }
    } else {
        None
    };
    let shape = PopReply {
        emit_key: false,
        nested: resp3(ctx) && count.is_some(),
    };
    let Some((_, e)) = first_zset(ctx, 1..2)? else {
        ctx.out.array(0);
        return Ok(());
    };
    if count == Some(0) {
        ctx.out.array(0);
        return Ok(());
    }
    let key = ctx.args.get(1);
    let items = pop_n(ctx, key, e, max, count.unwrap_or(1));
    reply_pop(&mut ctx.out, b"", &items, shape);
    Ok(())
}
fn zpopmin(ctx: &mut Ctx) -> CmdResult {
    zpop_generic(ctx, false)
}
fn zpopmax(ctx: &mut Ctx) -> CmdResult {
    zpop_generic(ctx, true)
}

/// ZMPOP / BZMPOP arguments from `numkeys_at`: (key indices, max, count).
fn parse_mpop(
    ctx: &Ctx,
    numkeys_at: usize,
) -> Result<(std::ops::Range<usize>, bool, u64), CmdError> {
    let numkeys = match parse_i64(ctx.args.get(numkeys_at)) {
        Some(n) if n > 0 => n as u64,
        _ => return Err(CmdError::err("numkeys should be greater than 0")),
    };
    let where_at = (numkeys_at as u64 + 1).saturating_add(numkeys);
    if where_at >= ctx.args.len() as u64 {
        return Err(CmdError::Syntax);
    }
    let where_at = where_at as usize;
    let max = if ctx.args.is(where_at, "MIN") {
        false
    } else if ctx.args.is(where_at, "MAX") {
        true
    } else {
        return Err(CmdError::Syntax);
    };
    let mut count = None;
    let mut j = where_at + 1;
    while j < ctx.args.len() {
        if count.is_none() && ctx.args.is(j, "COUNT") && j + 1 < ctx.args.len() {
            j += 1;
            count = match parse_i64(ctx.args.get(j)) {
                Some(n) if n > 0 => Some(n as u64),
                _ => return Err(CmdError::err("count should be greater than 0")),
            };
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    Ok((numkeys_at + 1..where_at, max, count.unwrap_or(1)))
}

fn zmpop(ctx: &mut Ctx) -> CmdResult {
    let (keys, max, count) = parse_mpop(ctx, 1)?;
    let shape = PopReply {
        emit_key: true,
        nested: true,
    };
    match first_zset(ctx, keys)? {
        Some((i, e)) => {
            let key = ctx.args.get(i);
            let items = pop_n(ctx, key, e, max, count);
            reply_pop(&mut ctx.out, key, &items, shape);
        }
        None => ctx.out.null_array(),
    }
    Ok(())
}

/// What a blocking pop does right now.
pub enum BzpopOutcome {
    /// Served from the key at argument `key_at`: the reply is written; `count` members
    /// were asked from the `max` end (for the log form).
    Served {
        key_at: usize,
        max: bool,
        count: u64,
    },
    /// Every key is missing: the client must block on these keys (argument indices)
    /// for `timeout_ms` (0 = forever) — the blocking layer's job.
    WouldBlock {
        keys: std::ops::Range<usize>,
        timeout_ms: u64,
    },
}

/// Redis's timeout argument in seconds (getTimeoutFromObjectOrReply): a float read as a
/// long double, so huge values parse and then wrap negative when converted to ms ("timeout
/// is negative", as 7.0 answers for `inf` or `1e400`).
fn parse_timeout(arg: &[u8]) -> Result<u64, CmdError> {
    let bad = || CmdError::err("timeout is not a float or out of range");
    if arg.is_empty() || arg[0].is_ascii_whitespace() {
        return Err(bad());
    }
    let t = strtod_whole(arg).filter(|t| !t.is_nan()).ok_or_else(bad)?;
    let ms = t * 1000.0;
    if ms < 0.0 || ms.is_infinite() || ms >= i64::MAX as f64 {
        return Err(CmdError::err("timeout is negative"));
    }
    Ok(ms as u64)
}

/// BZPOPMIN / BZPOPMAX (`mpop` false: `key... timeout`) and BZMPOP (`timeout numkeys
/// key... MIN|MAX [COUNT n]`): argument checks and the immediate case; [`bzpop_cmd`]
/// blocks on [`BzpopOutcome::WouldBlock`] (the blocking layer re-runs the command when a
/// key gets members).
pub fn bzpop_ready(
    ctx: &mut Ctx,
    mpop: bool,
    max_for_bzpop: bool,
) -> Result<BzpopOutcome, CmdError> {
    if mpop {
        let timeout_ms = parse_timeout(ctx.args.get(1))?;
        let (keys, max, count) = parse_mpop(ctx, 2)?;
        return match first_zset(ctx, keys.clone())? {
            Some((i, e)) => {
                let key = ctx.args.get(i);
                let items = pop_n(ctx, key, e, max, count);
                reply_pop(
                    &mut ctx.out,
                    key,
                    &items,
                    PopReply {
                        emit_key: true,
                        nested: true,
                    },
                );
                Ok(BzpopOutcome::Served {
                    key_at: i,
                    max,
                    count,
                })
            }
            None => Ok(BzpopOutcome::WouldBlock { keys, timeout_ms }),
        };
    }
    let last = ctx.args.len() - 1;
    let timeout_ms = parse_timeout(ctx.args.get(last))?;
    match first_zset(ctx, 1..last)? {
        Some((i, e)) => {
            let key = ctx.args.get(i);
            let items = pop_n(ctx, key, e, max_for_bzpop, 1);
            reply_pop(
                &mut ctx.out,
                key,
                &items,
                PopReply {
                    emit_key: true,
                    nested: false,
                },
            );
            Ok(BzpopOutcome::Served {
                key_at: i,
                max: max_for_bzpop,
                count: 1,
            })
        }
        None => Ok(BzpopOutcome::WouldBlock {
            keys: 1..last,
            timeout_ms,
        }),
    }
}

/// The BZPOPMIN / BZPOPMAX / BZMPOP handlers: serve now, or block on the keys. A served
/// pop is logged as ZPOPMIN / ZPOPMAX (Redis's rewrite of the blocking forms).
fn bzpop_cmd(ctx: &mut Ctx, mpop: bool, max: bool) -> CmdResult {
    match bzpop_ready(ctx, mpop, max)? {
        BzpopOutcome::Served { key_at, max, count } => {
            let name: &[u8] = if max { b"ZPOPMAX" } else { b"ZPOPMIN" };
            let mut form = vec![name.to_vec(), ctx.args.get(key_at).to_vec()];
            if mpop {
                form.push(count.to_string().into_bytes());
            }
            ctx.srv.propagate_as = Some(form);
        }
        BzpopOutcome::WouldBlock { keys, timeout_ms } => {
            if blocking::may_block(ctx) {
                let deadline = if timeout_ms == 0 {
                    0
                } else {
                    ctx.now_ms
                        .saturating_add(timeout_ms.min(i64::MAX as u64) as i64)
                };
                let keys = keys.map(|k| ctx.args.get(k).to_vec()).collect();
                blocking::block(ctx, keys, deadline, Kind::ZSet, TimeoutReply::NullArray);
            } else {
                ctx.out.null_array();
            }
        }
    }
    Ok(())
}
fn bzpopmin(ctx: &mut Ctx) -> CmdResult {
    bzpop_cmd(ctx, false, false)
}
fn bzpopmax(ctx: &mut Ctx) -> CmdResult {
    bzpop_cmd(ctx, false, true)
}
fn bzmpop(ctx: &mut Ctx) -> CmdResult {
    bzpop_cmd(ctx, true, false)
}

// ---- ZRANDMEMBER -----------------------------------------------------------------------------

fn zrandmember(ctx: &mut Ctx) -> CmdResult {
    let key = ctx.args.get(1);
    if ctx.args.len() == 2 {
        let Some(e) = read_zset(ctx, key)? else {
            ctx.out.null();
            return Ok(());
        };
        match zset::random(&mut ctx.srv.ks, e) {
            Some((m, _)) => ctx.out.bulk(&m),
            None => ctx.out.null(),
        }
        return Ok(());
    }
    let l = match parse_i64(ctx.args.get(2)) {
        None => return Err(CmdError::NotInteger),
        Some(i64::MIN) => {
            return Err(CmdError::err(
                "value is out of range, value must between -9223372036854775807 and 9223372036854775807",
            ))
        }
        Some(l) => l,
    };
    let withscores = match ctx.args.len() {
        3 => false,
        4 if ctx.args.is(3, "WITHSCORES") => {
            if !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&l) {
                return Err(CmdError::err("value is out of range"));
            }
            true
        }
        _ => return Err(CmdError::Syntax),
    };
    let Some(e) = read_zset(ctx, key)? else {
        ctx.out.array(0);
        return Ok(());
    };
    let r3 = resp3(ctx);
    if l == 0 {
        ctx.out.array(0);
        return Ok(());
    }
    let len = zset::len(&ctx.srv.ks, e);
    let picked: Pairs = if l < 0 || l == 1 {
        let n = l.unsigned_abs();
        if n > super::MAX_RANDOM_REPEATS {
            return Err(CmdError::err("value is out of range"));
        }
        (0..n)
            .filter_map(|_| zset::random(&mut ctx.srv.ks, e))
            .collect()
    } else if l as u64 >= len {
        // The whole set, in order (Redis's case 2).
        zset::all(&ctx.srv.ks, e)
    } else if (l as u64).saturating_mul(3) <= len {
        // Few members out of many: sample distinct ones without copying the set.
        let want = l as usize;
        let mut seen = std::collections::HashSet::new();
        let mut out = Vec::with_capacity(want);
        while out.len() < want {
            let Some((m, s)) = zset::random(&mut ctx.srv.ks, e) else {
                break;
            };
            if seen.insert(m.clone()) {
                out.push((m, s));
            }
        }
        out
    } else {
        let mut all = zset::all(&ctx.srv.ks, e);
        let n = l as usize;
        for i in 0..n {
            let j = i + ctx.srv.ks.rng.below((all.len() - i) as u64) as usize;
            all.swap(i, j);
        }
        all.truncate(n);
        all
    };
    reply_pairs(&mut ctx.out, &picked, withscores, r3);
    Ok(())
}

// ---- ZUNION / ZINTER / ZDIFF -----------------------------------------------------------------

#[derive(Clone, Copy, PartialEq)]
enum SetOp {
    Union,
    Inter,
    Diff,
}

#[derive(Clone, Copy)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

fn aggregate(target: &mut f64, v: f64, agg: Aggregate) {
    match agg {
        Aggregate::Sum => {
            *target += v;
            // inf + -inf: Redis keeps the convention of 0.
            if target.is_nan() {
                *target = 0.0;
            }
        }
        Aggregate::Min => {
            if v < *target {
                *target = v
            }
        }
        Aggregate::Max => {
            if v > *target {
                *target = v
            }
        }
    }
}

/// An input of a set operation: its elements (a missing key is empty).
struct Source {
    items: Pairs,
    weight: f64,
}

/// Reads one input key. Plain sets count with score 1 in Redis; the set type lives on
/// another branch, so a set key is refused here until that reader is wired in.
fn read_source(ctx: &mut Ctx, key: &[u8]) -> Result<Pairs, CmdError> {
    let db = ctx.db();
    match ctx.srv.ks.lookup_read(db, key, ctx.now_ms) {
        None => Ok(vec![]),
        Some(e) if ctx.srv.ks.kind(e) == Kind::ZSet => Ok(zset::all(&ctx.srv.ks, e)),
        // A plain set counts as a sorted set whose members all score 1, as in Redis.
        Some(e) if ctx.srv.ks.kind(e) == Kind::Set => {
            Ok(crate::collections::set::members(&ctx.srv.ks, e)
                .into_iter()
                .map(|m| (m, 1.0))
                .collect())
        }
        Some(_) => Err(CmdError::WrongType),
    }
}

/// Redis's zunionInterDiffGenericCommand. `numkeys_at`: the numkeys argument; `dst`: the
/// store destination; `card_only`: ZINTERCARD.
fn setop_generic(
    ctx: &mut Ctx,
    numkeys_at: usize,
    dst: Option<&[u8]>,
    op: SetOp,
    card_only: bool,
) -> CmdResult {
    let setnum = ctx.args.i64(numkeys_at)?;
    if setnum < 1 {
        let name = ctx.spec.name;
        return Err(CmdError::err(format!(
            "at least 1 input key is needed for '{name}' command"
        )));
    }
    if setnum as u64 > (ctx.args.len() - numkeys_at - 1) as u64 {
        return Err(CmdError::Syntax);
    }
    let setnum = setnum as usize;
    let mut srcs = Vec::with_capacity(setnum);
    for i in 0..setnum {
        let key = ctx.args.get(numkeys_at + 1 + i);
        srcs.push(Source {
            items: read_source(ctx, key)?,
            weight: 1.0,
        });
    }
    let mut agg = Aggregate::Sum;
    let mut withscores = false;
    let mut limit: u64 = 0;
    let mut j = numkeys_at + 1 + setnum;
    while j < ctx.args.len() {
        let remaining = ctx.args.len() - j;
        if op != SetOp::Diff && !card_only && remaining > setnum && ctx.args.is(j, "WEIGHTS") {
            j += 1;
            for s in srcs.iter_mut() {
                s.weight = parse_score(ctx.args.get(j))
                    .ok_or_else(|| CmdError::err("weight value is not a float"))?;
                j += 1;
            }
        } else if op != SetOp::Diff && !card_only && remaining >= 2 && ctx.args.is(j, "AGGREGATE") {
            agg = if ctx.args.is(j + 1, "SUM") {
                Aggregate::Sum
            } else if ctx.args.is(j + 1, "MIN") {
                Aggregate::Min
            } else if ctx.args.is(j + 1, "MAX") {
                Aggregate::Max
            } else {
                return Err(CmdError::Syntax);
            };
            j += 2;
        } else if dst.is_none() && !card_only && ctx.args.is(j, "WITHSCORES") {
            withscores = true;
            j += 1;
        } else if card_only && remaining >= 2 && ctx.args.is(j, "LIMIT") {
            limit = match parse_i64(ctx.args.get(j + 1)) {
                Some(n) if n >= 0 => n as u64,
                _ => return Err(CmdError::err("LIMIT can't be negative")),
            };
            j += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    if op != SetOp::Diff {
        // Smallest first (stable, as glibc's merge-sort qsort): the float sums add up
        // in Redis's order.
        srcs.sort_by_key(|s| s.items.len());
    }
    let mut result: Pairs = match op {
        SetOp::Union => {
            let mut acc: std::collections::HashMap<Vec<u8>, f64> = std::collections::HashMap::new();
            let mut order: Vec<Vec<u8>> = vec![];
            for s in &srcs {
                for (m, sc) in &s.items {
                    let mut v = s.weight * sc;
                    if v.is_nan() {
                        v = 0.0;
                    }
                    match acc.get_mut(m) {
                        Some(t) => aggregate(t, v, agg),
                        None => {
                            acc.insert(m.clone(), v);
                            order.push(m.clone());
                        }
                    }
                }
            }
            order
                .into_iter()
                .map(|m| {
                    let s = acc[&m];
                    (m, s)
                })
                .collect()
        }
        SetOp::Inter => {
            let lookups: Vec<std::collections::HashMap<&[u8], f64>> = srcs
                .iter()
                .map(|s| s.items.iter().map(|(m, sc)| (&m[..], *sc)).collect())
                .collect();
            let mut out = vec![];
            let mut card = 0u64;
            'outer: for (m, sc) in &srcs[0].items {
                let mut score = srcs[0].weight * sc;
                if score.is_nan() {
                    score = 0.0;
                }
                for (k, s) in srcs.iter().enumerate().skip(1) {
                    match lookups[k].get(&m[..]) {
                        Some(v) => aggregate(&mut score, v * s.weight, agg),
                        None => continue 'outer,
                    }
                }
                if card_only {
                    card += 1;
                    if limit > 0 && card >= limit {
                        break;
                    }
                } else {
                    out.push((m.clone(), score));
                }
            }
            if card_only {
                ctx.out.int(card as i64);
                return Ok(());
            }
            out
        }
        SetOp::Diff => {
            let others: std::collections::HashSet<&[u8]> = srcs[1..]
                .iter()
                .flat_map(|s| s.items.iter().map(|(m, _)| &m[..]))
                .collect();
            srcs[0]
                .items
                .iter()
                .filter(|(m, _)| !others.contains(&m[..]))
                .cloned()
                .collect()
        }
    };
    result.sort_by(|x, y| zset::cmp(x.1, &x.0, y.1, &y.0));
    match dst {
        Some(d) => {
            let event = match op {
                SetOp::Union => "zunionstore",
                SetOp::Inter => "zinterstore",
                SetOp::Diff => "zdiffstore",
            };
            store_result(ctx, d, result, event)?
        }
        None => {
            let r3 = resp3(ctx);
            reply_pairs(&mut ctx.out, &result, withscores, r3);
        }
    }
    Ok(())
}

fn zunion(ctx: &mut Ctx) -> CmdResult {
    setop_generic(ctx, 1, None, SetOp::Union, false)
}
fn zinter(ctx: &mut Ctx) -> CmdResult {
    setop_generic(ctx, 1, None, SetOp::Inter, false)
}
fn zdiff(ctx: &mut Ctx) -> CmdResult {
    setop_generic(ctx, 1, None, SetOp::Diff, false)
}
fn zunionstore(ctx: &mut Ctx) -> CmdResult {
    let dst = ctx.args.get(1);
    setop_generic(ctx, 2, Some(dst), SetOp::Union, false)
}
fn zinterstore(ctx: &mut Ctx) -> CmdResult {
    let dst = ctx.args.get(1);
    setop_generic(ctx, 2, Some(dst), SetOp::Inter, false)
}
fn zdiffstore(ctx: &mut Ctx) -> CmdResult {
    let dst = ctx.args.get(1);
    setop_generic(ctx, 2, Some(dst), SetOp::Diff, false)
}
fn zintercard(ctx: &mut Ctx) -> CmdResult {
    setop_generic(ctx, 1, None, SetOp::Inter, true)
}

// ---- ZSCAN -------------------------------------------------------------------------------------

fn zscan(ctx: &mut Ctx) -> CmdResult {
    let cursor = super::keys::key_scan_cursor(ctx)?;
    let key = ctx.args.get(1);
    let Some(e) = read_zset(ctx, key)? else {
        super::keys::empty_scan_reply(ctx);
        return Ok(());
    };
    let (count, pattern) = super::keys::key_scan_opts(ctx)?;
    let (next, mut pairs) = zset::scan(&ctx.srv.ks, e, cursor, count);
    if let Some(p) = pattern {
        pairs.retain(|(m, _)| glob_match(p, m, false));
    }
    ctx.out.array(2);
    ctx.out.bulk(next.to_string().as_bytes());
    ctx.out.array(pairs.len() * 2);
    for (m, s) in &pairs {
        ctx.out.bulk(m);
        ctx.out
            .bulk(crate::protocol::reply::format_double(*s).as_bytes());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn score_parsing_matches_strtod_rules() {
        assert_eq!(parse_score(b"1.5"), Some(1.5));
        assert_eq!(parse_score(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_score(b"+Infinity"), Some(f64::INFINITY));
        assert_eq!(parse_score(b"1e400"), None);
        assert_eq!(parse_score(b"1e-400"), None);
        assert_eq!(parse_score(b"0e-400"), Some(0.0));
        assert_eq!(parse_score(b"nan"), None);
        assert_eq!(parse_score(b" 1"), None);
        assert_eq!(parse_score(b"1 "), None);
        assert_eq!(parse_score(b"abc"), None);
        assert_eq!(parse_score(b""), None);
        assert_eq!(parse_score(b"infx"), None);
        assert_eq!(parse_score(b"0x10"), Some(16.0));
        assert_eq!(parse_score(b"-0x1.8p1"), Some(-3.0));
        assert_eq!(parse_score(b"0X.8"), Some(0.5));
        assert_eq!(parse_score(b"0x1p-2000"), None);
        assert_eq!(parse_score(b"0x1p5000"), None);
        assert_eq!(parse_score(b"0x"), None);
        assert_eq!(parse_score(b"0xg"), None);
        assert_eq!(parse_range_end(b"(1e400"), Some((f64::INFINITY, true)));
        assert_eq!(parse_range_end(b" 2"), Some((2.0, false)));
        assert_eq!(parse_range_end(b"("), Some((0.0, true)));
        assert_eq!(parse_range_end(b" "), None);
        assert_eq!(parse_range_end(b"(1\x00x"), Some((1.0, true)));
        assert_eq!(parse_range_end(b"(nan"), None);
        assert_eq!(rank_span(0, -1, 3), Some((0, 2)));
        assert_eq!(rank_span(-100, 100, 3), Some((0, 2)));
        assert_eq!(rank_span(2, 1, 3), None);
        assert_eq!(rank_span(i64::MIN, i64::MIN, 3), None);
    }

    // ---- BZPOPMIN/BZPOPMAX/BZMPOP's non-blocking core (not registered yet) ---------------

    use crate::commands::executor::Server;
    use crate::config::Config;

    fn bz_handler(ctx: &mut Ctx) -> CmdResult {
        let (mpop, max) = match ctx.spec.name {
            "bzmpop" => (true, false),
            "bzpopmax" => (false, true),
            _ => (false, false),
        };
        if let BzpopOutcome::WouldBlock { keys, timeout_ms } = bzpop_ready(ctx, mpop, max)? {
            ctx.out
                .simple(&format!("BLOCK {}..{} {timeout_ms}", keys.start, keys.end));
        }
        Ok(())
    }
    static BZ: &[CommandSpec] = &[
        CommandSpec::new("bzpopmin", -3, WRITE, "sorted-set", bz_handler),
        CommandSpec::new("bzpopmax", -3, WRITE, "sorted-set", bz_handler),
        CommandSpec::new("bzmpop", -5, WRITE, "sorted-set", bz_handler),
    ];

    /// Runs a command through the real table, or one of the unregistered BZ* specs.
    fn run(srv: &mut Server, c: &mut crate::commands::executor::Client, args: &[&str]) -> String {
        match BZ.iter().find(|s| args[0].eq_ignore_ascii_case(s.name)) {
            None => crate::commands::executor::testing::run(srv, c, args),
            Some(spec) => crate::commands::executor::testing::run_handler(srv, c, spec, args),
        }
    }

    #[test]
    fn blocking_pops_serve_at_once_or_say_where_to_block() {
        let mut srv = Server::new(Config::default()).unwrap();
        let mut c = srv.alloc_client("127.0.0.1:1".into(), "127.0.0.1:2".into());
        run(
            &mut srv,
            &mut c,
            &["ZADD", "z", "1", "a", "2", "b", "3", "c"],
        );
        assert_eq!(
            run(&mut srv, &mut c, &["BZPOPMIN", "nokey", "z", "0"]),
            "*3\r\n$1\r\nz\r\n$1\r\na\r\n$1\r\n1\r\n"
        );
        assert_eq!(
            run(&mut srv, &mut c, &["BZPOPMAX", "z", "1.5"]),
            "*3\r\n$1\r\nz\r\n$1\r\nc\r\n$1\r\n3\r\n"
        );
        assert_eq!(
            run(
                &mut srv,
                &mut c,
                &["BZMPOP", "0", "2", "x", "z", "MAX", "COUNT", "5"]
            ),
            "*2\r\n$1\r\nz\r\n*1\r\n*2\r\n$1\r\nb\r\n$1\r\n2\r\n"
        );
        assert_eq!(run(&mut srv, &mut c, &["EXISTS", "z"]), ":0\r\n");
        // Nothing to pop: the blocking layer gets the keys and the timeout.
        assert_eq!(
            run(&mut srv, &mut c, &["BZPOPMIN", "a", "b", "0.25"]),
            "+BLOCK 1..3 250\r\n"
        );
        assert_eq!(
            run(&mut srv, &mut c, &["BZMPOP", "2", "1", "k", "MIN"]),
            "+BLOCK 3..4 2000\r\n"
        );
        // Argument errors as Redis 7.0.
        assert_eq!(
            run(&mut srv, &mut c, &["BZPOPMIN", "k", "x"]),
            "-ERR timeout is not a float or out of range\r\n"
        );
        assert_eq!(
            run(&mut srv, &mut c, &["BZPOPMIN", "k", "-1"]),
            "-ERR timeout is negative\r\n"
        );
        assert_eq!(
            run(&mut srv, &mut c, &["BZPOPMIN", "k", "inf"]),
            "-ERR timeout is negative\r\n"
        );
        assert_eq!(
            run(&mut srv, &mut c, &["BZMPOP", "x", "1", "k", "MIN"]),
            "-ERR timeout is not a float or out of range\r\n"
        );
        assert_eq!(
            run(&mut srv, &mut c, &["BZMPOP", "0", "0", "k", "MIN"]),
            "-ERR numkeys should be greater than 0\r\n"
        );
        assert_eq!(
            run(&mut srv, &mut c, &["BZMPOP", "0", "1", "k", "UP"]),
            "-ERR syntax error\r\n"
        );
        run(&mut srv, &mut c, &["SET", "s", "x"]);
        assert_eq!(
            run(&mut srv, &mut c, &["BZPOPMIN", "s", "0"]),
            "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
        );
    }
}
