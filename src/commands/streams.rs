//! Stream commands (Redis's `t_stream.c`): XADD, XRANGE, XREVRANGE, XLEN, XDEL, XTRIM,
//! XSETID, XREAD (blocking included) and XINFO STREAM. The consumer-group commands are
//! in `stream_groups.rs` (XINFO GROUPS / CONSUMERS are registered here, under XINFO).
//!
//! Propagation as Redis: XADD with `*` or `<ms>-*` is logged with the ID it got, and an
//! approximate (`~`) trim of XADD / XTRIM is logged as the exact trim it did (`=` and the
//! resulting length, or the first remaining ID for MINID), so replaying the log gives the
//! same stream whatever the node layout.

use super::notify::{notify, NOTIFY_STREAM};
use super::stream_groups as groups;
use super::{Args, CmdError, CmdResult, CommandSpec, Ctx};
use super::{BLOCKING, DENYOOM, FAST, LOADING, READONLY, STALE, WRITE};
use crate::arena::Ref;
use crate::collections::stream::{self, Id, Limits, Meta, Trim};
use crate::keyspace::{Kind, Ttl};
use crate::protocol::reply::Resp;

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new("xadd", -5, WRITE | DENYOOM | FAST, "stream", xadd)
        .keys(1, 1, 1)
        .doc("Appends a new message to a stream. Creates the key if it doesn't exist.", "5.0.0"),
    CommandSpec::new("xrange", -4, READONLY, "stream", xrange)
        .keys(1, 1, 1)
        .doc("Returns the messages from a stream within a range of IDs.", "5.0.0"),
    CommandSpec::new("xrevrange", -4, READONLY, "stream", xrevrange)
        .keys(1, 1, 1)
        .doc("Returns the messages from a stream within a range of IDs in reverse order.", "5.0.0"),
    CommandSpec::new("xlen", 2, READONLY | FAST, "stream", xlen)
        .keys(1, 1, 1)
        .doc("Return the number of messages in a stream.", "5.0.0"),
    CommandSpec::new("xdel", -3, WRITE | FAST, "stream", xdel)
        .keys(1, 1, 1)
        .doc("Returns the number of messages after removing them from a stream.", "5.0.0"),
    CommandSpec::new("xtrim", -4, WRITE, "stream", xtrim)
        .keys(1, 1, 1)
        .doc("Deletes messages from the beginning of a stream.", "5.0.0"),
    CommandSpec::new("xsetid", -3, WRITE | DENYOOM | FAST, "stream", xsetid)
        .keys(1, 1, 1)
        .doc("An internal command for replicating stream values.", "5.0.0"),
    CommandSpec::new("xread", -4, READONLY | BLOCKING, "stream", xread).doc(
        "Returns messages from multiple streams with IDs greater than the ones requested. Blocks until a message is available otherwise.",
        "5.0.0",
    ),
    CommandSpec::new("xinfo", -2, 0, "stream", xinfo_container)
        .acl(0)
        .doc("A container for stream introspection commands.", "5.0.0")
        .subs(XINFO_SUBS),
];

static XINFO_SUBS: &[CommandSpec] = &[
    CommandSpec::new("stream", -3, READONLY, "stream", xinfo_stream)
        .keys(2, 2, 1)
        .doc("Returns information about a stream.", "5.0.0"),
    CommandSpec::new("consumers", 4, READONLY, "stream", groups::xinfo_consumers)
        .keys(2, 2, 1)
        .doc("List the consumers in a consumer group", "5.0.0"),
    CommandSpec::new("groups", 3, READONLY, "stream", groups::xinfo_groups)
        .keys(2, 2, 1)
        .doc("List the consumer groups of a stream", "5.0.0"),
    CommandSpec::new("help", 2, LOADING | STALE, "stream", groups::xinfo_help)
        .doc("Show helpful text about the different subcommands", "5.0.0"),
];

/// Entries read for a reply: ID and field/value pairs.
pub(super) type Entries = Vec<(Id, Vec<(Vec<u8>, Vec<u8>)>)>;

pub(super) const INVALID_ID: &str = "Invalid stream ID specified as stream command argument";

// ---- IDs ---------------------------------------------------------------------------------

/// Redis's string2ull: a canonical signed 64-bit integer that is not negative, or what
/// C's strtoull accepts of the whole string (leading spaces, a sign, decimal digits, no
/// overflow; a `-` negates modulo 2^64).
fn string2ull(s: &[u8]) -> Option<u64> {
    if let Some(v) = crate::util::parse_i64(s) {
        return (v >= 0).then_some(v as u64);
    }
    let mut i = 0;
    while i < s.len() && matches!(s[i], b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r') {
        i += 1;
    }
    let mut neg = false;
    if i < s.len() && (s[i] == b'+' || s[i] == b'-') {
        neg = s[i] == b'-';
        i += 1;
    }
    if i == s.len() {
        return None;
    }
    let mut v: u64 = 0;
    for &c in &s[i..] {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((c - b'0') as u64)?;
    }
    Some(if neg { v.wrapping_neg() } else { v })
}

/// Redis's streamGenericParseIDOrReply. `seq_given` (XADD only) allows `<ms>-*`, and is
/// set false for it.
pub(super) fn parse_id(
    arg: &[u8],
    missing_seq: u64,
    strict: bool,
    seq_given: Option<&mut bool>,
) -> Result<Id, CmdError> {
    let invalid = || CmdError::err(INVALID_ID);
    if arg.len() > 127 {
        return Err(invalid());
    }
    // Redis reads the argument as a C string.
    let buf = match arg.iter().position(|&b| b == 0) {
        Some(n) => &arg[..n],
        None => arg,
    };
    if strict && (buf == b"-" || buf == b"+") {
        return Err(invalid());
    }
    let allow_star = seq_given.is_some();
    if let Some(g) = seq_given {
        *g = true;
        if let Some(d) = buf.iter().position(|&b| b == b'-') {
            if &buf[d + 1..] == b"*" {
                *g = false;
            }
        }
    }
    if buf == b"-" {
        return Ok(Id::MIN);
    }
    if buf == b"+" {
        return Ok(Id::MAX);
    }
    match buf.iter().position(|&b| b == b'-') {
        Some(d) => {
            let ms = string2ull(&buf[..d]).ok_or_else(invalid)?;
            let rest = &buf[d + 1..];
            let seq = if allow_star && rest == b"*" {
                0
            } else {
                string2ull(rest).ok_or_else(invalid)?
            };
            Ok(Id::new(ms, seq))
        }
        None => Ok(Id::new(string2ull(buf).ok_or_else(invalid)?, missing_seq)),
    }
}

pub(super) fn parse_strict(arg: &[u8]) -> Result<Id, CmdError> {
    parse_id(arg, 0, true, None)
}

/// Redis's streamParseIntervalIDOrReply: `(` makes the bound exclusive.
pub(super) fn parse_interval(arg: &[u8], missing_seq: u64) -> Result<(Id, bool), CmdError> {
    if arg.len() > 1 && arg[0] == b'(' {
        return Ok((parse_id(&arg[1..], missing_seq, true, None)?, true));
    }
    Ok((parse_id(arg, missing_seq, false, None)?, false))
}

// ---- helpers -----------------------------------------------------------------------------

pub(super) fn read_stream(ctx: &mut Ctx, key: &[u8]) -> Result<Option<Ref>, CmdError> {
    let e = ctx.srv.ks.lookup_read(ctx.client.db, key, ctx.now_ms);
    super::of_kind(ctx, e, Kind::Stream)
}
pub(super) fn write_stream(ctx: &mut Ctx, key: &[u8]) -> Result<Option<Ref>, CmdError> {
    let e = ctx.srv.ks.lookup_write(ctx.client.db, key, ctx.now_ms);
    super::of_kind(ctx, e, Kind::Stream)
}

pub(super) fn meta(ctx: &Ctx, e: Ref) -> Meta {
    Meta::read(ctx.srv.ks.value(e))
}

pub(super) fn save_meta(ctx: &mut Ctx, e: Ref, m: &Meta) {
    ctx.srv.ks.value_mut(e).copy_from_slice(&m.encode());
}

fn limits(ctx: &Ctx) -> Limits {
    Limits::from_config(&ctx.srv.config)
}

pub(super) fn reply_entry(ctx: &mut Ctx, id: Id, pairs: &[(Vec<u8>, Vec<u8>)]) {
    ctx.out.array(2);
    ctx.out.bulk(&id.to_bytes());
    ctx.out.array(pairs.len() * 2);
    for (f, v) in pairs {
        ctx.out.bulk(f);
        ctx.out.bulk(v);
    }
}

/// Replies the live entries of `[start, end]` (at most `count`, 0: all) as an array.
fn reply_range(ctx: &mut Ctx, e: Ref, start: Id, end: Id, count: u64, rev: bool) {
    let m = meta(ctx, e);
    let mut items = Vec::new();
    stream::range(&ctx.srv.ks.arena, &m, start, end, rev, |id, pairs| {
        items.push((id, pairs));
        count == 0 || (items.len() as u64) < count
    });
    ctx.out.array(items.len());
    for (id, pairs) in &items {
        reply_entry(ctx, *id, pairs);
    }
}

// ---- XADD / XTRIM ------------------------------------------------------------------------

#[derive(Default)]
struct TrimArgs {
    how: Option<Trim>,
    approx: bool,
    limit: u64,
    /// Index of the MAXLEN / MINID value (for the log's rewrite).
    arg_idx: usize,
    id: Option<Id>,
    seq_given: bool,
    no_mkstream: bool,
}

/// Redis's streamParseAddOrTrimArgsOrReply. Returns the parsed options and, for XADD, the
/// index of the ID argument.
fn parse_add_or_trim(ctx: &Ctx, xadd: bool) -> Result<(TrimArgs, usize), CmdError> {
    let mut t = TrimArgs::default();
    let argc = ctx.args.len();
    let mut limit_given = false;
    let mut i = 2;
    let both = "syntax error, MAXLEN and MINID options at the same time are not compatible";
    while i < argc {
        let more = argc - 1 - i;
        let opt = ctx.args.get(i);
        if xadd && opt == b"*" {
            break;
        } else if ctx.args.is(i, "maxlen") && more > 0 {
            if t.how.is_some() {
                return Err(CmdError::err(both));
            }
            (t.approx, i) = trim_operator(ctx.args, i, more);
            let n = ctx.args.i64(i + 1)?;
            if n < 0 {
                return Err(CmdError::err("The MAXLEN argument must be >= 0."));
            }
            i += 1;
            t.how = Some(Trim::MaxLen(n as u64));
            t.arg_idx = i;
        } else if ctx.args.is(i, "minid") && more > 0 {
            if t.how.is_some() {
                return Err(CmdError::err(both));
            }
            (t.approx, i) = trim_operator(ctx.args, i, more);
            let id = parse_strict(ctx.args.get(i + 1))?;
            i += 1;
            t.how = Some(Trim::MinId(id));
            t.arg_idx = i;
        } else if ctx.args.is(i, "limit") && more > 0 {
            let n = ctx.args.i64(i + 1)?;
            if n < 0 {
                return Err(CmdError::err("The LIMIT argument must be >= 0."));
            }
            t.limit = n as u64;
            limit_given = true;
            i += 1;
        } else if xadd && ctx.args.is(i, "nomkstream") {
            t.no_mkstream = true;
        } else if xadd {
            let mut seq_given = true;
            t.id = Some(parse_id(opt, 0, true, Some(&mut seq_given))?);
            t.seq_given = seq_given;
            break;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    if t.limit > 0 && t.how.is_none() {
        return Err(CmdError::err(
            "syntax error, LIMIT cannot be used without specifying a trimming strategy",
        ));
    }
    if !xadd && t.how.is_none() {
        return Err(CmdError::err(
            "syntax error, XTRIM must be called with a trimming strategy",
        ));
    }
    if ctx.srv.loading {
        // The log's commands are exact (see the module comment).
        t.limit = 0;
    } else if limit_given {
        if !t.approx {
            return Err(CmdError::err(
                "syntax error, LIMIT cannot be used without the special ~ option",
            ));
        }
    } else if t.approx {
        let max = limits(ctx).max_entries as i64;
        let l = max.saturating_mul(100);
        t.limit = if l <= 0 {
            10_000
        } else {
            l.min(1_000_000) as u64
        };
    } else {
        t.limit = 0;
    }
    Ok((t, i))
}

/// The trim's log form: `=` in place of `~`, and the value the trim reached.
fn rewrite_trim(ctx: &Ctx, m: &Meta, t: &TrimArgs, argv: &mut [Vec<u8>]) {
    argv[t.arg_idx - 1] = b"=".to_vec();
    argv[t.arg_idx] = match t.how {
        Some(Trim::MaxLen(_)) => m.length.to_string().into_bytes(),
        _ => stream::edge_id(&ctx.srv.ks.arena, m, true, false).to_bytes(),
    };
}

fn xadd(ctx: &mut Ctx) -> CmdResult {
    let (t, idpos) = parse_add_or_trim(ctx, true)?;
    let field_pos = idpos + 1;
    let argc = ctx.args.len();
    if argc < field_pos + 2 || !(argc - field_pos).is_multiple_of(2) {
        return Err(CmdError::err(format!(
            "wrong number of arguments for '{}' command",
            ctx.spec.name
        )));
    }
    if t.seq_given && t.id == Some(Id::MIN) {
        return Err(CmdError::err(
            "The ID specified in XADD must be greater than 0-0",
        ));
    }
    let db = ctx.db();
    let key = ctx.args.get(1);
    let found = write_stream(ctx, key)?;
    if found.is_none() && t.no_mkstream {
        ctx.out.null();
        return Ok(());
    }
    let m0 = found.map_or_else(Meta::default, |e| meta(ctx, e));
    if m0.last_id == Id::MAX {
        return Err(CmdError::err(
            "The stream has exhausted the last possible ID, unable to add more items",
        ));
    }
    let last = m0.last_id;
    let too_small = || {
        CmdError::err(
            "The ID specified in XADD is equal or smaller than the target stream top item",
        )
    };
    let id = match t.id {
        Some(id) if t.seq_given => id,
        Some(id) if id.ms == last.ms => {
            if last.seq == u64::MAX {
                // Redis fails here without setting errno, and answers its other error.
                return Err(CmdError::err("Elements are too large to be stored"));
            }
            Id::new(last.ms, last.seq + 1)
        }
        Some(id) => Id::new(id.ms, 0),
        None => {
            let now = ctx.now_ms.max(0) as u64;
            if now > last.ms {
                Id::new(now, 0)
            } else {
                Id::new(last.ms, last.seq.wrapping_add(1))
            }
        }
    };
    if id <= last {
        return Err(too_small());
    }
    let pairs: Vec<&[u8]> = (field_pos..argc).map(|i| ctx.args.get(i)).collect();
    let total: u64 = pairs.iter().map(|p| p.len() as u64).sum();
    if total > stream::LISTPACK_MAX_BYTES {
        return Err(CmdError::err("Elements are too large to be stored"));
    }
    let room = stream::append_room_bytes(&ctx.srv.ks.arena, &m0, total);
    ctx.ensure_arena_room(room)?;
    let e = match found {
        Some(e) => e,
        None => ctx.srv.ks.set_value(
            db,
            key,
            Kind::Stream,
            stream::ENC_STREAM,
            &stream::empty_value(),
            Ttl::Clear,
        ),
    };
    let mut m = m0;
    let lim = limits(ctx);
    stream::append(&mut ctx.srv.ks.arena, &mut m, id, &pairs, lim);
    let trimmed = match t.how {
        Some(how) => stream::trim(&mut ctx.srv.ks.arena, &mut m, how, t.approx, t.limit),
        None => 0,
    };
    save_meta(ctx, e, &m);
    let mut id_text = [0u8; stream::ID_TEXT_MAX];
    ctx.out.bulk(id.text(&mut id_text));
    ctx.dirty(1);
    // Redis trims after announcing the entry: `xtrim` follows `xadd`, when it removed any.
    notify(ctx, NOTIFY_STREAM, "xadd", key);
    if trimmed > 0 {
        notify(ctx, NOTIFY_STREAM, "xtrim", key);
    }
    let rewrite_id = t.id.is_none() || !t.seq_given;
    // The exact form matters only where commands are propagated (the key, all that
    // watchers and blocked readers are told, is the same in both forms).
    if ctx.srv.aof.propagating() && (rewrite_id || (t.how.is_some() && t.approx)) {
        let mut argv: Vec<Vec<u8>> = ctx.args.iter().map(|a| a.to_vec()).collect();
        if t.how.is_some() && t.approx {
            rewrite_trim(ctx, &m, &t, &mut argv);
        }
        if rewrite_id {
            argv[idpos] = id.to_bytes();
        }
        ctx.srv.propagate_as = Some(argv);
    }
    Ok(())
}

fn xtrim(ctx: &mut Ctx) -> CmdResult {
    let (t, _) = parse_add_or_trim(ctx, false)?;
    let key = ctx.args.get(1);
    let Some(e) = write_stream(ctx, key)? else {
        ctx.out.int(0);
        return Ok(());
    };
    let mut m = meta(ctx, e);
    let Some(how) = t.how else {
        return Err(CmdError::Syntax);
    };
    let n = stream::trim(&mut ctx.srv.ks.arena, &mut m, how, t.approx, t.limit);
    save_meta(ctx, e, &m);
    if n > 0 {
        notify(ctx, NOTIFY_STREAM, "xtrim", key);
        if t.approx {
            let mut argv: Vec<Vec<u8>> = ctx.args.iter().map(|a| a.to_vec()).collect();
            rewrite_trim(ctx, &m, &t, &mut argv);
            ctx.srv.propagate_as = Some(argv);
        }
        ctx.dirty(n);
    }
    ctx.out.int(n as i64);
    Ok(())
}

// ---- reads -------------------------------------------------------------------------------

fn xrange_generic(ctx: &mut Ctx, rev: bool) -> CmdResult {
    let (start_arg, end_arg) = if rev { (3, 2) } else { (2, 3) };
    let (mut start, start_ex) = parse_interval(ctx.args.get(start_arg), 0)?;
    if start_ex {
        start = start
            .incr()
            .ok_or_else(|| CmdError::err("invalid start ID for the interval"))?;
    }
    let (mut end, end_ex) = parse_interval(ctx.args.get(end_arg), u64::MAX)?;
    if end_ex {
        end = end
            .decr()
            .ok_or_else(|| CmdError::err("invalid end ID for the interval"))?;
    }
    let mut count: i64 = -1;
    let mut j = 4;
    while j < ctx.args.len() {
        let more = ctx.args.len() - j - 1;
        if ctx.args.is(j, "count") && more >= 1 {
            count = ctx.args.i64(j + 1)?.max(0);
            j += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let key = ctx.args.get(1);
    let Some(e) = read_stream(ctx, key)? else {
        ctx.out.array(0);
        return Ok(());
    };
    if count == 0 {
        ctx.out.null_array();
        return Ok(());
    }
    reply_range(ctx, e, start, end, count.max(0) as u64, rev);
    Ok(())
}

fn xrange(ctx: &mut Ctx) -> CmdResult {
    xrange_generic(ctx, false)
}
fn xrevrange(ctx: &mut Ctx) -> CmdResult {
    xrange_generic(ctx, true)
}

fn xlen(ctx: &mut Ctx) -> CmdResult {
    let key = ctx.args.get(1);
    let n = match read_stream(ctx, key)? {
        Some(e) => meta(ctx, e).length,
        None => 0,
    };
    ctx.out.int(n as i64);
    Ok(())
}

fn xdel(ctx: &mut Ctx) -> CmdResult {
    let key = ctx.args.get(1);
    let Some(e) = write_stream(ctx, key)? else {
        ctx.out.int(0);
        return Ok(());
    };
    let ids = (2..ctx.args.len())
        .map(|i| parse_strict(ctx.args.get(i)))
        .collect::<Result<Vec<Id>, CmdError>>()?;
    let mut m = meta(ctx, e);
    let mut deleted = 0u64;
    let mut first_entry = false;
    for id in ids {
        if stream::delete(&mut ctx.srv.ks.arena, &mut m, id) {
            first_entry |= id == m.first_id;
            if id > m.max_deleted_id {
                m.max_deleted_id = id;
            }
            deleted += 1;
        }
    }
    if deleted > 0 {
        if m.length == 0 {
            m.first_id = Id::MIN;
        } else if first_entry {
            m.first_id = stream::edge_id(&ctx.srv.ks.arena, &m, true, true);
        }
        save_meta(ctx, e, &m);
        ctx.dirty(deleted);
        notify(ctx, NOTIFY_STREAM, "xdel", key);
    }
    ctx.out.int(deleted as i64);
    Ok(())
}

fn xsetid(ctx: &mut Ctx) -> CmdResult {
    let id = parse_strict(ctx.args.get(2))?;
    let mut entries_added: Option<u64> = None;
    let mut max_xdel = Id::MIN;
    let mut i = 3;
    while i < ctx.args.len() {
        let more = ctx.args.len() - 1 - i;
        if ctx.args.is(i, "entriesadded") && more > 0 {
            let n = ctx.args.i64(i + 1)?;
            if n < 0 {
                return Err(CmdError::err("entries_added must be positive"));
            }
            entries_added = Some(n as u64);
            i += 2;
        } else if ctx.args.is(i, "maxdeletedid") && more > 0 {
            max_xdel = parse_strict(ctx.args.get(i + 1))?;
            if id < max_xdel {
                return Err(CmdError::err(
                    "The ID specified in XSETID is smaller than the provided max_deleted_entry_id",
                ));
            }
            i += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let key = ctx.args.get(1);
    let Some(e) = write_stream(ctx, key)? else {
        return Err(CmdError::NoSuchKey);
    };
    let mut m = meta(ctx, e);
    if m.length > 0 {
        if id < stream::last_valid_id(&ctx.srv.ks.arena, &m) {
            return Err(CmdError::err(
                "The ID specified in XSETID is smaller than the target stream top item",
            ));
        }
        if entries_added.is_some_and(|n| m.length > n) {
            return Err(CmdError::err(
                "The entries_added specified in XSETID is smaller than the target stream length",
            ));
        }
    }
    m.last_id = id;
    if let Some(n) = entries_added {
        m.entries_added = n;
    }
    if max_xdel != Id::MIN {
        m.max_deleted_id = max_xdel;
    }
    save_meta(ctx, e, &m);
    ctx.out.ok();
    ctx.dirty(1);
    notify(ctx, NOTIFY_STREAM, "xsetid", key);
    Ok(())
}

// ---- XREAD -------------------------------------------------------------------------------

/// Redis's XREAD_BLOCKED_DEFAULT_COUNT (1000 in 7.0): a blocked XREAD or XREADGROUP
/// without COUNT is served at most this many entries per stream.
pub(super) const BLOCKED_DEFAULT_COUNT: i64 = 1000;

/// The options XREAD and XREADGROUP share, parsed in one loop as Redis's xreadCommand
/// does (so both give the same errors in the same order).
pub(super) struct ReadOptions {
    pub timeout_ms: Option<i64>,
    /// Where the BLOCK value is (parked re-runs copy it).
    pub block_arg: usize,
    pub count: i64,
    /// The first key after STREAMS.
    pub streams_arg: usize,
    /// XREADGROUP: where the group name is (0: no GROUP).
    pub group_arg: usize,
    pub noack: bool,
}

pub(super) fn parse_read_options(ctx: &Ctx, xreadgroup: bool) -> Result<ReadOptions, CmdError> {
    let argc = ctx.args.len();
    let mut o = ReadOptions {
        timeout_ms: None,
        block_arg: 0,
        count: 0,
        streams_arg: 0,
        group_arg: 0,
        noack: false,
    };
    let mut i = 1;
    while i < argc {
        let more = argc - i - 1;
        if ctx.args.is(i, "block") && more > 0 {
            if ctx.srv.in_script_call {
                return Err(CmdError::err(format!(
                    "{} command is not allowed with BLOCK option from scripts",
                    ctx.args.str(0)
                )));
            }
            i += 1;
            let t = crate::util::parse_i64(ctx.args.get(i))
                .ok_or_else(|| CmdError::err("timeout is not an integer or out of range"))?;
            if t < 0 {
                return Err(CmdError::err("timeout is negative"));
            }
            o.timeout_ms = Some(t);
            o.block_arg = i;
        } else if ctx.args.is(i, "count") && more > 0 {
            i += 1;
            o.count = ctx.args.i64(i)?.max(0);
        } else if ctx.args.is(i, "streams") && more > 0 {
            o.streams_arg = i + 1;
            if !(argc - o.streams_arg).is_multiple_of(2) {
                return Err(CmdError::err("Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified."));
            }
            break;
        } else if ctx.args.is(i, "group") && more >= 2 {
            if !xreadgroup {
                return Err(CmdError::err(
                    "The GROUP option is only supported by XREADGROUP. You called XREAD instead.",
                ));
            }
            o.group_arg = i + 1;
            i += 2;
        } else if ctx.args.is(i, "noack") {
            if !xreadgroup {
                return Err(CmdError::err(
                    "The NOACK option is only supported by XREADGROUP. You called XREAD instead.",
                ));
            }
            o.noack = true;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    if o.streams_arg == 0 {
        return Err(CmdError::Syntax);
    }
    Ok(o)
}

/// The key whose write is re-running this parked read (None: not a re-run).
pub(super) fn woken_key(ctx: &Ctx) -> Option<Vec<u8>> {
    ctx.srv
        .blocking
        .serving_key()
        .filter(|(d, _)| *d == ctx.client.db)
        .map(|(_, k)| k.clone())
}

/// Whether a read answers for `key`: always, unless it is a re-run, which answers for the
/// key that woke it, once (`served_keys`: the keys answered so far).
pub(super) fn answers_for<'a>(
    woken_by: Option<&[u8]>,
    key: &[u8],
    mut served_keys: impl Iterator<Item = &'a [u8]>,
) -> bool {
    match woken_by {
        None => true,
        Some(w) => key == w && !served_keys.any(|k| k == key),
    }
}

fn xread(ctx: &mut Ctx) -> CmdResult {
    let argc = ctx.args.len();
    let ReadOptions {
        timeout_ms,
        block_arg,
        count,
        streams_arg,
        ..
    } = parse_read_options(ctx, false)?;
    let n = (argc - streams_arg) / 2;
    let mut ids = Vec::with_capacity(n);
    for k in 0..n {
        let key = ctx.args.get(streams_arg + k);
        let found = read_stream(ctx, key)?;
        let arg = ctx.args.get(streams_arg + n + k);
        if arg == b"$" {
            ids.push(found.map_or(Id::MIN, |e| meta(ctx, e).last_id));
            continue;
        }
        if arg == b">" {
            return Err(CmdError::err("The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option."));
        }
        ids.push(parse_strict(arg)?);
    }
    let mut served: Vec<(usize, Entries)> = Vec::new();
    // A re-run of a parked read answers for the key that woke it, once.
    let woken_by = woken_key(ctx);
    for (k, gt) in ids.iter().enumerate() {
        let key = ctx.args.get(streams_arg + k);
        let served_keys = served.iter().map(|(j, _)| ctx.args.get(streams_arg + j));
        if !answers_for(woken_by.as_deref(), key, served_keys) {
            continue;
        }
        let Some(e) = read_stream(ctx, key)? else {
            continue;
        };
        let m = meta(ctx, e);
        // Woken by a write, a read is served when the stream's last ID passed the one it
        // waits after, even if the entries past it are deleted by then (an XADD and an
        // XDEL in one EXEC): the reply names the key with no entries, as Redis's. Only a
        // read that has not waited yet looks at the entries themselves.
        let nothing_new = if woken_by.is_some() {
            m.last_id <= *gt
        } else {
            m.length == 0 || stream::last_valid_id(&ctx.srv.ks.arena, &m) <= *gt
        };
        if nothing_new {
            continue;
        }
        let Some(start) = gt.incr() else { continue };
        let mut items = Vec::new();
        stream::range(&ctx.srv.ks.arena, &m, start, Id::MAX, false, |id, pairs| {
            items.push((id, pairs));
            count == 0 || (items.len() as i64) < count
        });
        served.push((k, items));
    }
    if !served.is_empty() {
        let resp3 = ctx.client.resp == Resp::V3;
        if resp3 {
            ctx.out.map(served.len());
        } else {
            ctx.out.array(served.len());
        }
        for (k, items) in &served {
            if !resp3 {
                ctx.out.array(2);
            }
            ctx.out.bulk(ctx.args.get(streams_arg + k));
            ctx.out.array(items.len());
            for (id, pairs) in items {
                reply_entry(ctx, *id, pairs);
            }
        }
        return Ok(());
    }
    let Some(t) = timeout_ms else {
        ctx.out.null_array();
        return Ok(());
    };
    if !ctx.srv.may_block_now() {
        ctx.out.null_array();
        return Ok(());
    }
    // Parked as the command that will be re-run when a key is written: `$` resolved to
    // the IDs seen now, and the count a served blocked read gets.
    let mut argv: Vec<Vec<u8>> = vec![
        ctx.args.get(0).to_vec(),
        b"BLOCK".to_vec(),
        ctx.args.get(block_arg).to_vec(),
        b"COUNT".to_vec(),
        (if count > 0 {
            count
        } else {
            BLOCKED_DEFAULT_COUNT
        })
        .to_string()
        .into_bytes(),
        b"STREAMS".to_vec(),
    ];
    let keys: Vec<Vec<u8>> = (0..n)
        .map(|k| ctx.args.get(streams_arg + k).to_vec())
        .collect();
    argv.extend(keys.iter().cloned());
    argv.extend(ids.iter().map(|id| id.to_bytes()));
    let deadline = if t == 0 {
        0
    } else {
        ctx.now_ms.saturating_add(t)
    };
    ctx.srv.block_stream_read(keys, deadline, argv);
    Ok(())
}

// ---- XINFO -------------------------------------------------------------------------------

fn xinfo_container(ctx: &mut Ctx) -> CmdResult {
    let sub: String = ctx.args.str(1).chars().take(128).collect();
    Err(CmdError::err(format!(
        "unknown subcommand or wrong number of arguments for '{sub}'. Try XINFO HELP."
    )))
}

/// The number of nodes Redis's radix tree has for these keys (16-byte big-endian master
/// IDs, ascending) when it is as compressed as insertion leaves it: the root, every
/// branching prefix and its children, and every key. O(nodes).
fn rax_nodes(keys: &[[u8; 16]]) -> u64 {
    let mut set: std::collections::HashSet<Vec<u8>> = std::collections::HashSet::new();
    set.insert(Vec::new());
    for k in keys {
        set.insert(k.to_vec());
    }
    for w in keys.windows(2) {
        let l = w[0]
            .iter()
            .zip(w[1].iter())
            .take_while(|(a, b)| a == b)
            .count();
        if l < 16 {
            set.insert(w[0][..l].to_vec());
            set.insert(w[0][..l + 1].to_vec());
            set.insert(w[1][..l + 1].to_vec());
        }
    }
    set.len() as u64
}

fn xinfo_stream(ctx: &mut Ctx) -> CmdResult {
    let key = ctx.args.get(2);
    let Some(e) = read_stream(ctx, key)? else {
        return Err(CmdError::NoSuchKey);
    };
    let optc = ctx.args.len() - 3;
    let syntax = || {
        CmdError::err(format!(
            "unknown subcommand or wrong number of arguments for '{}'. Try XINFO HELP.",
            ctx.args.str(1).chars().take(128).collect::<String>()
        ))
    };
    let mut full = false;
    let mut count: i64 = 10;
    if optc > 0 {
        if (optc != 1 && optc != 3) || !ctx.args.is(3, "full") {
            return Err(syntax());
        }
        full = true;
        if optc == 3 {
            if !ctx.args.is(4, "count") {
                return Err(syntax());
            }
            count = ctx.args.i64(5)?;
            if count < 0 {
                count = 10;
            }
        }
    }
    let m = meta(ctx, e);
    let keys: Vec<[u8; 16]> = stream::nodes(&ctx.srv.ks.arena, ctx.srv.ks.value(e))
        .iter()
        .map(|(id, _)| id.to_be())
        .collect();
    ctx.out.map(if full { 9 } else { 10 });
    ctx.out.bulk(b"length");
    ctx.out.int(m.length as i64);
    ctx.out.bulk(b"radix-tree-keys");
    ctx.out.int(keys.len() as i64);
    ctx.out.bulk(b"radix-tree-nodes");
    ctx.out.int(rax_nodes(&keys) as i64);
    ctx.out.bulk(b"last-generated-id");
    ctx.out.bulk(&m.last_id.to_bytes());
    ctx.out.bulk(b"max-deleted-entry-id");
    ctx.out.bulk(&m.max_deleted_id.to_bytes());
    ctx.out.bulk(b"entries-added");
    ctx.out.int(m.entries_added as i64);
    ctx.out.bulk(b"recorded-first-entry-id");
    ctx.out.bulk(&m.first_id.to_bytes());
    if !full {
        ctx.out.bulk(b"groups");
        ctx.out.int(groups::group_count(ctx, &m) as i64);
        for (name, rev) in [(&b"first-entry"[..], false), (b"last-entry", true)] {
            ctx.out.bulk(name);
            let mut got = None;
            stream::range(&ctx.srv.ks.arena, &m, Id::MIN, Id::MAX, rev, |id, p| {
                got = Some((id, p));
                false
            });
            match got {
                Some((id, p)) => reply_entry(ctx, id, &p),
                None => ctx.out.null(),
            }
        }
    } else {
        ctx.out.bulk(b"entries");
        reply_range(ctx, e, Id::MIN, Id::MAX, count as u64, false);
        ctx.out.bulk(b"groups");
        groups::reply_full_groups(ctx, &m, count as u64);
    }
    Ok(())
}

/// After MAXLEN / MINID at `i` (with `more` arguments behind it): an optional `~`
/// (approximate) or `=` before the value. Returns whether it is approximate and the index
/// the value follows (the operator's, or `i` without one).
fn trim_operator(args: Args, i: usize, more: usize) -> (bool, usize) {
    let next = args.get(i + 1);
    if more >= 2 && next == b"~" {
        (true, i + 1)
    } else if more >= 2 && next == b"=" {
        (false, i + 1)
    } else {
        (false, i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_parse_as_redis() {
        let p = |s: &str| parse_id(s.as_bytes(), 0, true, None).ok();
        assert_eq!(p("5"), Some(Id::new(5, 0)));
        assert_eq!(p("5-3"), Some(Id::new(5, 3)));
        assert_eq!(p("-"), None);
        assert_eq!(p("+5"), Some(Id::new(5, 0)));
        assert_eq!(p(" 7-1"), Some(Id::new(7, 1)));
        assert_eq!(
            p("18446744073709551615-18446744073709551615"),
            Some(Id::MAX)
        );
        assert_eq!(p("18446744073709551616"), None);
        assert_eq!(p("1-2-3"), None);
        assert_eq!(p("-1"), None);
        assert_eq!(p("5-*"), None);
        let mut g = true;
        assert_eq!(
            parse_id(b"5-*", 0, true, Some(&mut g)).ok(),
            Some(Id::new(5, 0))
        );
        assert!(!g);
        assert_eq!(parse_id(b"-", 0, false, None).ok(), Some(Id::MIN));
        assert_eq!(parse_id(b"+", 0, false, None).ok(), Some(Id::MAX));
        assert_eq!(
            parse_id(b"3", u64::MAX, false, None).ok(),
            Some(Id::new(3, u64::MAX))
        );
    }

    #[test]
    fn rax_node_count_matches_a_compressed_tree() {
        // One key: the root (compressed) and the key's leaf.
        assert_eq!(rax_nodes(&[Id::new(1, 0).to_be()]), 2);
        // Two keys differing in the last byte: root chain, branch, two leaves.
        assert_eq!(
            rax_nodes(&[Id::new(1, 0).to_be(), Id::new(1, 1).to_be()]),
            4
        );
    }
}
