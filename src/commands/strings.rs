//! String commands (Redis's `t_string.c`): GET/SET and friends, counters, ranges.

use super::notify::{notify, NOTIFY_GENERIC, NOTIFY_STRING};
use super::{CmdError, CmdResult, CommandSpec, Ctx, DENYOOM, FAST, READONLY, WRITE};
use crate::arena::Ref;
use crate::keyspace::{Kind, StrEnc, Ttl};
use crate::util::parse_i64;

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new("get", 2, READONLY | FAST, "string", get).keys(1, 1, 1).doc("Returns the string value of a key.", "1.0.0"),
    CommandSpec::new("set", -3, WRITE | DENYOOM, "string", set).keys(1, 1, 1).doc("Sets the string value of a key, ignoring its type. The key is created if it doesn't exist.", "1.0.0"),
    CommandSpec::new("setnx", 3, WRITE | DENYOOM | FAST, "string", setnx).keys(1, 1, 1).doc("Set the string value of a key only when the key doesn't exist.", "1.0.0"),
    CommandSpec::new("setex", 4, WRITE | DENYOOM, "string", setex).keys(1, 1, 1).doc("Sets the string value and expiration time of a key. Creates the key if it doesn't exist.", "2.0.0"),
    CommandSpec::new("psetex", 4, WRITE | DENYOOM, "string", psetex).keys(1, 1, 1).doc("Sets both string value and expiration time in milliseconds of a key. The key is created if it doesn't exist.", "2.6.0"),
    CommandSpec::new("mget", -2, READONLY | FAST, "string", mget).keys(1, -1, 1).doc("Atomically returns the string values of one or more keys.", "1.0.0"),
    CommandSpec::new("mset", -3, WRITE | DENYOOM, "string", mset).keys(1, -1, 2).doc("Atomically creates or modifies the string values of one or more keys.", "1.0.1"),
    CommandSpec::new("msetnx", -3, WRITE | DENYOOM, "string", msetnx).keys(1, -1, 2).doc("Atomically modifies the string values of one or more keys only when all keys don't exist.", "1.0.1"),
    CommandSpec::new("getset", 3, WRITE | DENYOOM | FAST, "string", getset).keys(1, 1, 1).doc("Returns the previous string value of a key after setting it to a new value.", "1.0.0"),
    CommandSpec::new("getdel", 2, WRITE | FAST, "string", getdel).keys(1, 1, 1).doc("Returns the string value of a key after deleting the key.", "6.2.0"),
    CommandSpec::new("getex", -2, WRITE | FAST, "string", getex).keys(1, 1, 1).doc("Returns the string value of a key after setting its expiration time.", "6.2.0"),
    CommandSpec::new("append", 3, WRITE | DENYOOM | FAST, "string", append).keys(1, 1, 1).doc("Appends a string to the value of a key. Creates the key if it doesn't exist.", "2.0.0"),
    CommandSpec::new("strlen", 2, READONLY | FAST, "string", strlen).keys(1, 1, 1).doc("Returns the length of a string value.", "2.2.0"),
    CommandSpec::new("incr", 2, WRITE | DENYOOM | FAST, "string", incr).keys(1, 1, 1).doc("Increments the integer value of a key by one. Uses 0 as initial value if the key doesn't exist.", "1.0.0"),
    CommandSpec::new("decr", 2, WRITE | DENYOOM | FAST, "string", decr).keys(1, 1, 1).doc("Decrements the integer value of a key by one. Uses 0 as initial value if the key doesn't exist.", "1.0.0"),
    CommandSpec::new("incrby", 3, WRITE | DENYOOM | FAST, "string", incrby).keys(1, 1, 1).doc("Increments the integer value of a key by a number. Uses 0 as initial value if the key doesn't exist.", "1.0.0"),
    CommandSpec::new("decrby", 3, WRITE | DENYOOM | FAST, "string", decrby).keys(1, 1, 1).doc("Decrements a number from the integer value of a key. Uses 0 as initial value if the key doesn't exist.", "1.0.0"),
    CommandSpec::new("incrbyfloat", 3, WRITE | DENYOOM | FAST, "string", incrbyfloat).keys(1, 1, 1).doc("Increment the float value of a key by the given amount", "2.6.0"),
    CommandSpec::new("getrange", 4, READONLY, "string", getrange).keys(1, 1, 1).doc("Returns a substring of the string stored at a key.", "2.4.0"),
    CommandSpec::new("substr", 4, READONLY, "string", getrange).keys(1, 1, 1).doc("Returns a substring from a string value.", "1.0.0"),
    CommandSpec::new("setrange", 4, WRITE | DENYOOM, "string", setrange).keys(1, 1, 1).doc("Overwrites a part of a string value with another by an offset. Creates the key if it doesn't exist.", "2.2.0"),
];

/// Looks up a string for reading: None if missing, WRONGTYPE if another type.
pub fn read_string(ctx: &mut Ctx, key: &[u8]) -> Result<Option<Ref>, CmdError> {
    match ctx.srv.ks.lookup_read(ctx.client.db, key, ctx.now_ms) {
        Some(e) if ctx.srv.ks.kind(e) != Kind::String => Err(CmdError::WrongType),
        other => Ok(other),
    }
}

/// Looks up a string for writing (no hit/miss stats).
pub fn write_string(ctx: &mut Ctx, key: &[u8]) -> Result<Option<Ref>, CmdError> {
    match ctx.srv.ks.lookup_write(ctx.client.db, key, ctx.now_ms) {
        Some(e) if ctx.srv.ks.kind(e) != Kind::String => Err(CmdError::WrongType),
        other => Ok(other),
    }
}

/// The largest value an arena entry can hold (its length field is 32-bit), with room to
/// spare for the entry header; a write never grows a string past it whatever
/// proto-max-bulk-len says.
pub const MAX_STRING_BYTES: u64 = u32::MAX as u64 - 64;

/// The largest string a write may produce (Redis checks against proto-max-bulk-len).
/// A string about to grow to `len` bytes: within `proto-max-bulk-len`, and within the
/// arena's room.
fn check_string_length(ctx: &mut Ctx, len: u64) -> CmdResult {
    let limit = (ctx.srv.config.settings().proto_max_bulk_len.max(0) as u64).min(MAX_STRING_BYTES);
    if len > limit {
        return Err(CmdError::err(
            "string exceeds maximum allowed size (proto-max-bulk-len)",
        ));
    }
    ctx.ensure_arena_room(len)
}

fn get(ctx: &mut Ctx) -> CmdResult {
    let key = ctx.args.get(1);
    match read_string(ctx, key)? {
        Some(e) => ctx.bulk_value(e),
        None => ctx.out.null(),
    }
    Ok(())
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Cond {
    None,
    Nx,
    Xx,
}

/// Expiry options shared by SET and GETEX.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ExpireOpt {
    None,
    /// Relative or absolute, already converted to an absolute ms time.
    At(i64),
    KeepTtl,
    Persist,
}

/// Converts an EX/PX/EXAT/PXAT argument to an absolute ms time, with Redis's checks.
pub fn parse_expire_arg(
    ctx: &Ctx,
    unit: &[u8],
    arg: &[u8],
    cmd: &'static str,
) -> Result<i64, CmdError> {
    let v = parse_i64(arg).ok_or(CmdError::NotInteger)?;
    if v <= 0 {
        return Err(CmdError::InvalidExpire(cmd));
    }
    let (ms, absolute) = match unit.to_ascii_uppercase().as_slice() {
        b"EX" => (v.checked_mul(1000), false),
        b"PX" => (Some(v), false),
        b"EXAT" => (v.checked_mul(1000), true),
        _ => (Some(v), true),
    };
    let ms = ms.ok_or(CmdError::InvalidExpire(cmd))?;
    if absolute {
        Ok(ms)
    } else {
        ms.checked_add(ctx.now_ms)
            .ok_or(CmdError::InvalidExpire(cmd))
    }
}

/// Options of SET and GETEX, parsed with Redis's rules: an option may repeat (the last
/// expire argument wins) but may not be combined with one it conflicts with (NX with XX,
/// KEEPTTL or PERSIST with an expire, two different expire units).
struct ExtOpts {
    cond: Cond,
    want_get: bool,
    keepttl: bool,
    persist: bool,
    /// The expire unit word (EX/PX/EXAT/PXAT) and the index of its argument. The number is
    /// validated later, as Redis does, so syntax errors win over bad numbers.
    expire: Option<(&'static [u8], usize)>,
}

fn parse_ext_opts(ctx: &Ctx, from: usize, set: bool) -> Result<ExtOpts, CmdError> {
    let mut o = ExtOpts {
        cond: Cond::None,
        want_get: false,
        keepttl: false,
        persist: false,
        expire: None,
    };
    let mut i = from;
    while i < ctx.args.len() {
        let a = ctx.args.get(i);
        let has_next = i + 1 < ctx.args.len();
        let unit: Option<&'static [u8]> = [&b"EX"[..], b"PX", b"EXAT", b"PXAT"]
            .into_iter()
            .find(|u| a.eq_ignore_ascii_case(u));
        if set && a.eq_ignore_ascii_case(b"NX") && o.cond != Cond::Xx {
            o.cond = Cond::Nx;
        } else if set && a.eq_ignore_ascii_case(b"XX") && o.cond != Cond::Nx {
            o.cond = Cond::Xx;
        } else if set && a.eq_ignore_ascii_case(b"GET") {
            o.want_get = true;
        } else if set && a.eq_ignore_ascii_case(b"KEEPTTL") && o.expire.is_none() {
            o.keepttl = true;
        } else if !set && a.eq_ignore_ascii_case(b"PERSIST") && o.expire.is_none() {
            o.persist = true;
        } else if let Some(u) = unit.filter(|u| {
            has_next && !o.keepttl && !o.persist && o.expire.is_none_or(|(prev, _)| prev == *u)
        }) {
            o.expire = Some((u, i + 1));
            i += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    Ok(o)
}

fn set(ctx: &mut Ctx) -> CmdResult {
    let opts = parse_ext_opts(ctx, 3, true)?;
    let (cond, want_get) = (opts.cond, opts.want_get);
    let expire = match opts.expire {
        Some((unit, at)) => ExpireOpt::At(parse_expire_arg(ctx, unit, ctx.args.get(at), "set")?),
        None if opts.keepttl => ExpireOpt::KeepTtl,
        None => ExpireOpt::None,
    };
    let key = ctx.args.get(1);
    let value = ctx.args.get(2);
    let db = ctx.client.db;
    let existing = if want_get {
        let e = read_string(ctx, key)?;
        match e {
            Some(e) => ctx.bulk_value(e),
            None => ctx.out.null(),
        }
        e
    } else {
        ctx.srv.ks.lookup_write(db, key, ctx.now_ms)
    };
    let blocked = match cond {
        Cond::Nx => existing.is_some(),
        Cond::Xx => existing.is_none(),
        Cond::None => false,
    };
    if blocked {
        if !want_get {
            ctx.out.null();
        }
        return Ok(());
    }
    let ttl = match expire {
        ExpireOpt::None | ExpireOpt::Persist => Ttl::Clear,
        ExpireOpt::KeepTtl => Ttl::Keep,
        ExpireOpt::At(t) => Ttl::At(t),
    };
    ctx.srv
        .ks
        .set_string(db, key, value, StrEnc::for_value(value), ttl);
    ctx.dirty(1);
    notify(ctx, NOTIFY_STRING, "set", key);
    if matches!(ttl, Ttl::At(_)) {
        notify(ctx, NOTIFY_GENERIC, "expire", key);
    }
    if !want_get {
        ctx.out.ok();
    }
    Ok(())
}

fn setnx(ctx: &mut Ctx) -> CmdResult {
    let (key, value) = (ctx.args.get(1), ctx.args.get(2));
    let db = ctx.client.db;
    if ctx.srv.ks.lookup_write(db, key, ctx.now_ms).is_some() {
        ctx.out.int(0);
    } else {
        ctx.srv
            .ks
            .set_string(db, key, value, StrEnc::for_value(value), Ttl::Clear);
        ctx.dirty(1);
        notify(ctx, NOTIFY_STRING, "set", key);
        ctx.out.int(1);
    }
    Ok(())
}

fn setex_generic(ctx: &mut Ctx, unit: &[u8], cmd: &'static str) -> CmdResult {
    let t = parse_expire_arg(ctx, unit, ctx.args.get(2), cmd)?;
    let (key, value) = (ctx.args.get(1), ctx.args.get(3));
    let db = ctx.client.db;
    ctx.srv.ks.find(db, key, ctx.now_ms);
    ctx.srv
        .ks
        .set_string(db, key, value, StrEnc::for_value(value), Ttl::At(t));
    ctx.dirty(1);
    notify(ctx, NOTIFY_STRING, "set", key);
    notify(ctx, NOTIFY_GENERIC, "expire", key);
    ctx.out.ok();
    Ok(())
}

fn setex(ctx: &mut Ctx) -> CmdResult {
    setex_generic(ctx, b"EX", "setex")
}

fn psetex(ctx: &mut Ctx) -> CmdResult {
    setex_generic(ctx, b"PX", "psetex")
}

fn mget(ctx: &mut Ctx) -> CmdResult {
    let n = ctx.args.len() - 1;
    ctx.out.array(n);
    for i in 1..=n {
        let key = ctx.args.get(i);
        match ctx.srv.ks.lookup_read(ctx.client.db, key, ctx.now_ms) {
            Some(e) if ctx.srv.ks.kind(e) == Kind::String => ctx.bulk_value(e),
            _ => ctx.out.null(),
        }
    }
    Ok(())
}

fn mset_generic(ctx: &mut Ctx, nx: bool) -> CmdResult {
    if ctx.args.len().is_multiple_of(2) {
        return Err(CmdError::err(format!(
            "wrong number of arguments for '{}' command",
            ctx.spec.name
        )));
    }
    let db = ctx.client.db;
    if nx {
        for i in (1..ctx.args.len()).step_by(2) {
            if ctx
                .srv
                .ks
                .lookup_write(db, ctx.args.get(i), ctx.now_ms)
                .is_some()
            {
                ctx.out.int(0);
                return Ok(());
            }
        }
    }
    for i in (1..ctx.args.len()).step_by(2) {
        let (k, v) = (ctx.args.get(i), ctx.args.get(i + 1));
        // As Redis's setKey: an expired key is expired (and notified) before the write.
        ctx.srv.ks.find(db, k, ctx.now_ms);
        ctx.srv
            .ks
            .set_string(db, k, v, StrEnc::for_value(v), Ttl::Clear);
        notify(ctx, NOTIFY_STRING, "set", k);
    }
    ctx.dirty((ctx.args.len() / 2) as u64);
    if nx {
        ctx.out.int(1);
    } else {
        ctx.out.ok();
    }
    Ok(())
}

fn mset(ctx: &mut Ctx) -> CmdResult {
    mset_generic(ctx, false)
}

fn msetnx(ctx: &mut Ctx) -> CmdResult {
    mset_generic(ctx, true)
}

fn getset(ctx: &mut Ctx) -> CmdResult {
    let (key, value) = (ctx.args.get(1), ctx.args.get(2));
    match read_string(ctx, key)? {
        Some(e) => ctx.bulk_value(e),
        None => ctx.out.null(),
    }
    let db = ctx.client.db;
    ctx.srv
        .ks
        .set_string(db, key, value, StrEnc::for_value(value), Ttl::Clear);
    notify(ctx, NOTIFY_STRING, "set", key);
    ctx.dirty(1);
    Ok(())
}

fn getdel(ctx: &mut Ctx) -> CmdResult {
    let key = ctx.args.get(1);
    match read_string(ctx, key)? {
        Some(e) => {
            ctx.bulk_value(e);
            let db = ctx.client.db;
            ctx.srv.ks.delete_entry(db, e);
            ctx.dirty(1);
            notify(ctx, NOTIFY_GENERIC, "del", key);
        }
        None => ctx.out.null(),
    }
    Ok(())
}

fn getex(ctx: &mut Ctx) -> CmdResult {
    let opts = parse_ext_opts(ctx, 2, false)?;
    let key = ctx.args.get(1);
    let Some(e) = read_string(ctx, key)? else {
        ctx.out.null();
        return Ok(());
    };
    // Redis validates the time only once it knows the key exists.
    let opt = match opts.expire {
        Some((unit, at)) => ExpireOpt::At(parse_expire_arg(ctx, unit, ctx.args.get(at), "getex")?),
        None if opts.persist => ExpireOpt::Persist,
        None => ExpireOpt::None,
    };
    ctx.bulk_value(e);
    let db = ctx.client.db;
    match opt {
        ExpireOpt::At(t) if t <= ctx.now_ms => {
            // An expire time in the past deletes the key, as Redis.
            ctx.srv.ks.delete_entry(db, e);
            ctx.dirty(1);
            notify(ctx, NOTIFY_GENERIC, "del", key);
        }
        ExpireOpt::At(t) => {
            ctx.srv.ks.set_expire(db, e, Some(t));
            ctx.dirty(1);
            notify(ctx, NOTIFY_GENERIC, "expire", key);
        }
        ExpireOpt::Persist if ctx.srv.ks.has_expire(e) => {
            ctx.srv.ks.set_expire(db, e, None);
            ctx.dirty(1);
            notify(ctx, NOTIFY_GENERIC, "persist", key);
        }
        _ => {}
    }
    Ok(())
}

fn append(ctx: &mut Ctx) -> CmdResult {
    let (key, tail) = (ctx.args.get(1), ctx.args.get(2));
    let db = ctx.client.db;
    let new_len = match write_string(ctx, key)? {
        None => {
            // A new key gets the argument's own encoding (Redis's tryObjectEncoding).
            ctx.srv
                .ks
                .set_string(db, key, tail, StrEnc::for_value(tail), Ttl::Clear);
            tail.len()
        }
        Some(e) => {
            let old = ctx.srv.ks.value(e).len();
            check_string_length(ctx, (old + tail.len()) as u64)?;
            let e = ctx.srv.ks.resize_value(db, e, old + tail.len());
            ctx.srv.ks.value_mut(e)[old..].copy_from_slice(tail);
            ctx.srv.ks.set_str_enc(e, StrEnc::Raw);
            old + tail.len()
        }
    };
    ctx.dirty(1);
    notify(ctx, NOTIFY_STRING, "append", key);
    ctx.out.int(new_len as i64);
    Ok(())
}

fn strlen(ctx: &mut Ctx) -> CmdResult {
    let key = ctx.args.get(1);
    let n = read_string(ctx, key)?
        .map(|e| ctx.srv.ks.value(e).len())
        .unwrap_or(0);
    ctx.out.int(n as i64);
    Ok(())
}

/// INCR/DECR/INCRBY/DECRBY: the stored value must be a strict decimal i64.
fn incr_by(ctx: &mut Ctx, delta: i64) -> CmdResult {
    let key = ctx.args.get(1);
    let db = ctx.client.db;
    let cur = match write_string(ctx, key)? {
        Some(e) => {
            let v = ctx.srv.ks.value(e);
            if v.len() > 20 {
                return Err(CmdError::NotInteger);
            }
            parse_i64(v).ok_or(CmdError::NotInteger)?
        }
        None => 0,
    };
    let new = cur.checked_add(delta).ok_or(CmdError::Overflow)?;
    let mut buf = [0u8; 20];
    let text = crate::util::fmt_i64(new, &mut buf);
    ctx.srv.ks.set_string(db, key, text, StrEnc::Int, Ttl::Keep);
    ctx.dirty(1);
    notify(ctx, NOTIFY_STRING, "incrby", key);
    ctx.out.int(new);
    Ok(())
}

fn incr(ctx: &mut Ctx) -> CmdResult {
    incr_by(ctx, 1)
}

fn decr(ctx: &mut Ctx) -> CmdResult {
    incr_by(ctx, -1)
}

fn incrby(ctx: &mut Ctx) -> CmdResult {
    let d = ctx.args.i64(2)?;
    incr_by(ctx, d)
}

fn decrby(ctx: &mut Ctx) -> CmdResult {
    let d = ctx.args.i64(2)?;
    if d == i64::MIN {
        return Err(CmdError::err("decrement would overflow"));
    }
    incr_by(ctx, -d)
}

fn getrange(ctx: &mut Ctx) -> CmdResult {
    let mut start = ctx.args.i64(2)?;
    let mut end = ctx.args.i64(3)?;
    let key = ctx.args.get(1);
    let Some(e) = read_string(ctx, key)? else {
        ctx.out.bulk(b"");
        return Ok(());
    };
    let v = ctx.srv.ks.value(e);
    let len = v.len() as i64;
    if start < 0 && end < 0 && start > end {
        ctx.out.bulk(b"");
        return Ok(());
    }
    if start < 0 {
        start += len;
    }
    if end < 0 {
        end += len;
    }
    start = start.max(0);
    end = end.max(0);
    if end >= len {
        end = len - 1;
    }
    if start > end || len == 0 {
        ctx.out.bulk(b"");
    } else {
        ctx.out.bulk(&v[start as usize..=end as usize]);
    }
    Ok(())
}

fn setrange(ctx: &mut Ctx) -> CmdResult {
    let offset = ctx.args.i64(2)?;
    if offset < 0 {
        return Err(CmdError::err("offset is out of range"));
    }
    let (key, value) = (ctx.args.get(1), ctx.args.get(3));
    let db = ctx.client.db;
    let existing = write_string(ctx, key)?;
    if value.is_empty() {
        let len = existing.map(|e| ctx.srv.ks.value(e).len()).unwrap_or(0);
        ctx.out.int(len as i64);
        return Ok(());
    }
    let end = offset as u64 + value.len() as u64;
    check_string_length(ctx, end)?;
    let end = end as usize;
    let offset = offset as usize;
    let e = match existing {
        None => {
            let e = ctx.srv.ks.set_string(db, key, b"", StrEnc::Raw, Ttl::Clear);
            ctx.srv.ks.resize_value(db, e, end)
        }
        Some(e) => {
            let old = ctx.srv.ks.value(e).len();
            ctx.srv.ks.resize_value(db, e, old.max(end))
        }
    };
    ctx.srv.ks.value_mut(e)[offset..end].copy_from_slice(value);
    ctx.srv.ks.set_str_enc(e, StrEnc::Raw);
    ctx.dirty(1);
    notify(ctx, NOTIFY_STRING, "setrange", key);
    let n = ctx.srv.ks.value(e).len();
    ctx.out.int(n as i64);
    Ok(())
}

// ---- INCRBYFLOAT: extended-precision arithmetic through the C shim ----------------------

extern "C" {
    /// See src/native/longdouble.c. `current` may be null (missing key = 0).
    fn cairn_ld_incr(
        current: *const u8,
        current_len: usize,
        incr: *const u8,
        incr_len: usize,
        out: *mut u8,
        out_cap: usize,
        out_len: *mut usize,
    ) -> i32;
}

/// Redis formats into (and refuses to parse numbers longer than) 5 KiB.
const LD_MAX_CHARS: usize = 5 * 1024;

/// Why an extended-precision increment failed; callers pick their command's error text
/// (HINCRBYFLOAT says "hash value is not a float" for a bad stored value).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LdError {
    /// The stored value is not a float Redis's `string2ld` accepts.
    BadCurrent,
    /// The increment is not a float Redis's `string2ld` accepts.
    BadIncrement,
    /// The sum is NaN or infinite.
    NotFinite,
}

impl From<LdError> for CmdError {
    fn from(e: LdError) -> CmdError {
        match e {
            LdError::BadCurrent | LdError::BadIncrement => CmdError::NotFloat,
            LdError::NotFinite => CmdError::err("increment would produce NaN or Infinity"),
        }
    }
}

/// `current + incr` computed in C `long double` (80-bit on x86-64) and formatted the way
/// Redis's INCRBYFLOAT/HINCRBYFLOAT store it ("%.17Lf", trailing zeros trimmed), so
/// `0.1 + 0.2` gives `0.3` exactly as Redis does. `current` None counts as 0.
pub fn incr_long_double(current: Option<&[u8]>, incr: &[u8]) -> Result<Vec<u8>, LdError> {
    let mut out = vec![0u8; LD_MAX_CHARS];
    let mut out_len = 0usize;
    let (cur_ptr, cur_len) = match current {
        Some(c) => (c.as_ptr(), c.len()),
        None => (std::ptr::null(), 0),
    };
    // SAFETY: every pointer/length pair describes a live buffer for the duration of the
    // call; the C side reads at most `*_len` bytes from the inputs (copying them into its
    // own NUL-terminated buffer) and writes at most `out_cap` bytes into `out`.
    let rc = unsafe {
        cairn_ld_incr(
            cur_ptr,
            cur_len,
            incr.as_ptr(),
            incr.len(),
            out.as_mut_ptr(),
            out.len(),
            &mut out_len,
        )
    };
    match rc {
        0 => {
            out.truncate(out_len.min(LD_MAX_CHARS));
            Ok(out)
        }
        1 => Err(LdError::BadCurrent),
        2 => Err(LdError::BadIncrement),
        // 3, and 4 (no room: impossible for a finite long double in 5 KiB).
        _ => Err(LdError::NotFinite),
    }
}

fn incrbyfloat(ctx: &mut Ctx) -> CmdResult {
    let (key, incr) = (ctx.args.get(1), ctx.args.get(2));
    let db = ctx.client.db;
    let existing = write_string(ctx, key)?;
    let current = existing.map(|e| ctx.srv.ks.value(e));
    let text = incr_long_double(current, incr)?;
    // The TTL stays (Redis overwrites the value only); encoding as createStringObject.
    let enc = if text.len() <= crate::keyspace::EMBSTR_MAX_BYTES {
        StrEnc::Embstr
    } else {
        StrEnc::Raw
    };
    ctx.srv.ks.set_string(db, key, &text, enc, Ttl::Keep);
    ctx.dirty(1);
    notify(ctx, NOTIFY_STRING, "incrbyfloat", key);
    ctx.out.bulk(&text);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ld(cur: Option<&str>, incr: &str) -> Result<String, LdError> {
        incr_long_double(cur.map(str::as_bytes), incr.as_bytes())
            .map(|v| String::from_utf8(v).unwrap())
    }

    #[test]
    fn long_double_sums_match_redis() {
        assert_eq!(ld(Some("10.5"), "0.1").unwrap(), "10.6");
        assert_eq!(ld(Some("0.1"), "0.2").unwrap(), "0.3");
        assert_eq!(ld(None, "5.0e3").unwrap(), "5000");
        assert_eq!(ld(Some("3"), "-3").unwrap(), "0");
        assert_eq!(ld(Some("-0.0"), "0").unwrap(), "0");
        assert_eq!(ld(Some("1"), "-1.5").unwrap(), "-0.5");
        assert_eq!(ld(Some("0x10"), "1").unwrap(), "17");
    }

    #[test]
    fn long_double_rejects_what_redis_rejects() {
        assert_eq!(ld(Some("abc"), "1"), Err(LdError::BadCurrent));
        assert_eq!(ld(Some("1"), " 1"), Err(LdError::BadIncrement));
        assert_eq!(ld(Some("1"), "1 "), Err(LdError::BadIncrement));
        assert_eq!(ld(Some("1"), ""), Err(LdError::BadIncrement));
        assert_eq!(ld(Some("1"), "nan"), Err(LdError::BadIncrement));
        assert_eq!(ld(Some("1"), "1e99999"), Err(LdError::BadIncrement));
        assert_eq!(ld(Some("1"), "inf"), Err(LdError::NotFinite));
        assert_eq!(
            incr_long_double(Some(b"1\x001"), b"1"),
            Err(LdError::BadCurrent)
        );
        let long = "1".repeat(LD_MAX_CHARS);
        assert_eq!(ld(Some("1"), &long), Err(LdError::BadIncrement));
    }
}
