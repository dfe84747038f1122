//! Hash commands (Redis's `t_hash.c`), over the arena hashes of `crate::collections::hash`.

use super::notify::{notify, NOTIFY_HASH};
use super::strings::{incr_long_double, LdError};
use super::{CmdError, CmdResult, CommandSpec, Ctx, DENYOOM, FAST, READONLY, WRITE};
use crate::arena::Ref;
use crate::collections::hash::{self, Limits};
use crate::collections::listpack::Val;
use crate::commands::lists::reply_val;
use crate::keyspace::Kind;
use crate::protocol::reply::Resp;
use crate::util::{glob_match, parse_i64};

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new("hset", -4, WRITE | DENYOOM | FAST, "hash", hset).keys(1, 1, 1).doc("Creates or modifies the value of a field in a hash.", "2.0.0"),
    CommandSpec::new("hmset", -4, WRITE | DENYOOM | FAST, "hash", hmset).keys(1, 1, 1).doc("Sets the values of multiple fields.", "2.0.0"),
    CommandSpec::new("hsetnx", 4, WRITE | DENYOOM | FAST, "hash", hsetnx).keys(1, 1, 1).doc("Sets the value of a field in a hash only when the field doesn't exist.", "2.0.0"),
    CommandSpec::new("hget", 3, READONLY | FAST, "hash", hget).keys(1, 1, 1).doc("Returns the value of a field in a hash.", "2.0.0"),
    CommandSpec::new("hmget", -3, READONLY | FAST, "hash", hmget).keys(1, 1, 1).doc("Returns the values of all fields in a hash.", "2.0.0"),
    CommandSpec::new("hdel", -3, WRITE | FAST, "hash", hdel).keys(1, 1, 1).doc("Deletes one or more fields and their values from a hash. Deletes the hash if no fields remain.", "2.0.0"),
    CommandSpec::new("hlen", 2, READONLY | FAST, "hash", hlen).keys(1, 1, 1).doc("Returns the number of fields in a hash.", "2.0.0"),
    CommandSpec::new("hstrlen", 3, READONLY | FAST, "hash", hstrlen).keys(1, 1, 1).doc("Returns the length of the value of a field.", "3.2.0"),
    CommandSpec::new("hexists", 3, READONLY | FAST, "hash", hexists).keys(1, 1, 1).doc("Determines whether a field exists in a hash.", "2.0.0"),
    CommandSpec::new("hkeys", 2, READONLY, "hash", hkeys).keys(1, 1, 1).doc("Returns all fields in a hash.", "2.0.0"),
    CommandSpec::new("hvals", 2, READONLY, "hash", hvals).keys(1, 1, 1).doc("Returns all values in a hash.", "2.0.0"),
    CommandSpec::new("hgetall", 2, READONLY, "hash", hgetall).keys(1, 1, 1).doc("Returns all fields and values in a hash.", "2.0.0"),
    CommandSpec::new("hincrby", 4, WRITE | DENYOOM | FAST, "hash", hincrby).keys(1, 1, 1).doc("Increments the integer value of a field in a hash by a number. Uses 0 as initial value if the field doesn't exist.", "2.0.0"),
    CommandSpec::new("hincrbyfloat", 4, WRITE | DENYOOM | FAST, "hash", hincrbyfloat).keys(1, 1, 1).doc("Increments the floating point value of a field by a number. Uses 0 as initial value if the field doesn't exist.", "2.6.0"),
    CommandSpec::new("hrandfield", -2, READONLY, "hash", hrandfield).keys(1, 1, 1).doc("Returns one or more random fields from a hash.", "6.2.0"),
    CommandSpec::new("hscan", -3, READONLY, "hash", hscan).keys(1, 1, 1).doc("Iterates over fields and values of a hash.", "2.8.0"),
];

fn check(ctx: &Ctx, e: Option<Ref>) -> Result<Option<Ref>, CmdError> {
    super::of_kind(ctx, e, Kind::Hash)
}
fn read_hash(ctx: &mut Ctx, key: &[u8]) -> Result<Option<Ref>, CmdError> {
    let e = ctx.srv.ks.lookup_read(ctx.client.db, key, ctx.now_ms);
    check(ctx, e)
}
fn write_hash(ctx: &mut Ctx, key: &[u8]) -> Result<Option<Ref>, CmdError> {
    let e = ctx.srv.ks.lookup_write(ctx.client.db, key, ctx.now_ms);
    check(ctx, e)
}
fn limits(ctx: &Ctx) -> Limits {
    Limits::from_config(&ctx.srv.config)
}
/// The hash at key, created empty if missing.
fn hash_for_write(ctx: &mut Ctx, key: &[u8]) -> Result<Ref, CmdError> {
    let db = ctx.db();
    Ok(match write_hash(ctx, key)? {
        Some(e) => e,
        None => hash::create(&mut ctx.srv.ks, db, key),
    })
}

fn wrong_args(ctx: &Ctx) -> CmdError {
    CmdError::Other(format!(
        "ERR wrong number of arguments for '{}' command",
        ctx.spec.name
    ))
}

fn hset_generic(ctx: &mut Ctx) -> Result<u64, CmdError> {
    if ctx.args.len() % 2 == 1 {
        return Err(wrong_args(ctx));
    }
    let key = ctx.args.get(1);
    let db = ctx.db();
    let lim = limits(ctx);
    let mut e = hash_for_write(ctx, key)?;
    // Redis's hashTypeTryConversion: any long argument converts before the writes.
    let lens: Vec<usize> = (2..ctx.args.len()).map(|i| ctx.args.get(i).len()).collect();
    e = hash::try_convert_for(&mut ctx.srv.ks, db, e, &lens, lim);
    let mut created = 0;
    for i in (2..ctx.args.len()).step_by(2) {
        let (ne, c) = hash::set(
            &mut ctx.srv.ks,
            db,
            e,
            ctx.args.get(i),
            ctx.args.get(i + 1),
            lim,
        );
        e = ne;
        created += c as u64;
    }
    ctx.dirty((ctx.args.len() as u64 - 2) / 2);
    Ok(created)
}

fn hset(ctx: &mut Ctx) -> CmdResult {
    let n = hset_generic(ctx)?;
    ctx.out.int(n as i64);
    notify(ctx, NOTIFY_HASH, "hset", ctx.args.get(1));
    Ok(())
}

fn hmset(ctx: &mut Ctx) -> CmdResult {
    hset_generic(ctx)?;
    ctx.out.ok();
    notify(ctx, NOTIFY_HASH, "hset", ctx.args.get(1));
    Ok(())
}

fn hsetnx(ctx: &mut Ctx) -> CmdResult {
    let (key, f, v) = (ctx.args.get(1), ctx.args.get(2), ctx.args.get(3));
    let db = ctx.db();
    let lim = limits(ctx);
    if let Some(e) = write_hash(ctx, key)? {
        if hash::get(&ctx.srv.ks, e, f).is_some() {
            ctx.out.int(0);
            return Ok(());
        }
    }
    let e = hash_for_write(ctx, key)?;
    hash::set(&mut ctx.srv.ks, db, e, f, v, lim);
    ctx.dirty(1);
    ctx.out.int(1);
    notify(ctx, NOTIFY_HASH, "hset", key);
    Ok(())
}

fn hget(ctx: &mut Ctx) -> CmdResult {
    let key = ctx.args.get(1);
    match read_hash(ctx, key)? {
        Some(e) => match hash::get(&ctx.srv.ks, e, ctx.args.get(2)) {
            Some(v) => reply_val(&mut ctx.out, v),
            None => ctx.out.null(),
        },
        None => ctx.out.null(),
    }
    Ok(())
}

fn hmget(ctx: &mut Ctx) -> CmdResult {
    let key = ctx.args.get(1);
    let e = read_hash(ctx, key)?;
    ctx.out.array(ctx.args.len() - 2);
    for i in 2..ctx.args.len() {
        match e.and_then(|e| hash::get(&ctx.srv.ks, e, ctx.args.get(i))) {
            Some(v) => reply_val(&mut ctx.out, v),
            None => ctx.out.null(),
        }
    }
    Ok(())
}

fn hdel(ctx: &mut Ctx) -> CmdResult {
    let key = ctx.args.get(1);
    let found = write_hash(ctx, key)?;
    super::remove_members(
        ctx,
        (super::notify::NOTIFY_HASH, "hdel"),
        found,
        hash::del,
        hash::len,
    )
}

fn hlen(ctx: &mut Ctx) -> CmdResult {
    let key = ctx.args.get(1);
    let n = match read_hash(ctx, key)? {
        Some(e) => hash::len(&ctx.srv.ks, e),
        None => 0,
    };
    ctx.out.int(n as i64);
    Ok(())
}

fn val_len(v: Val) -> usize {
    match v {
        Val::Str(s) => s.len(),
        Val::Int(i) => i.to_string().len(),
    }
}

fn hstrlen(ctx: &mut Ctx) -> CmdResult {
    let key = ctx.args.get(1);
    let n = match read_hash(ctx, key)? {
        Some(e) => hash::get(&ctx.srv.ks, e, ctx.args.get(2)).map_or(0, val_len),
        None => 0,
    };
    ctx.out.int(n as i64);
    Ok(())
}

fn hexists(ctx: &mut Ctx) -> CmdResult {
    let key = ctx.args.get(1);
    let n = match read_hash(ctx, key)? {
        Some(e) => hash::get(&ctx.srv.ks, e, ctx.args.get(2)).is_some(),
        None => false,
    };
    ctx.out.int(n as i64);
    Ok(())
}

/// HKEYS (fields), HVALS (values), HGETALL (both; a map in RESP3).
fn getall_generic(ctx: &mut Ctx, fields: bool, values: bool) -> CmdResult {
    let key = ctx.args.get(1);
    let Some(e) = read_hash(ctx, key)? else {
        if fields && values {
            ctx.out.map(0);
        } else {
            ctx.out.array(0);
        }
        return Ok(());
    };
    let ks = &ctx.srv.ks;
    let n = hash::len(ks, e) as usize;
    if fields && values {
        ctx.out.map(n);
    } else {
        ctx.out.array(n);
    }
    let out = &mut ctx.out;
    hash::for_each(ks, e, |f, v| {
        if fields {
            reply_val(out, f);
        }
        if values {
            reply_val(out, v);
        }
    });
    Ok(())
}
fn hkeys(ctx: &mut Ctx) -> CmdResult {
    getall_generic(ctx, true, false)
}
fn hvals(ctx: &mut Ctx) -> CmdResult {
    getall_generic(ctx, false, true)
}
fn hgetall(ctx: &mut Ctx) -> CmdResult {
    getall_generic(ctx, true, true)
}

fn hincrby(ctx: &mut Ctx) -> CmdResult {
    let incr = ctx.args.i64(3)?;
    let (key, f) = (ctx.args.get(1), ctx.args.get(2));
    let db = ctx.db();
    let lim = limits(ctx);
    let e = hash_for_write(ctx, key)?;
    let cur = match hash::get(&ctx.srv.ks, e, f) {
        Some(Val::Int(i)) => i,
        Some(Val::Str(s)) => {
            parse_i64(s).ok_or_else(|| CmdError::err("hash value is not an integer"))?
        }
        None => 0,
    };
    let Some(n) = cur.checked_add(incr) else {
        return Err(CmdError::Overflow);
    };
    hash::set(&mut ctx.srv.ks, db, e, f, n.to_string().as_bytes(), lim);
    ctx.dirty(1);
    ctx.out.int(n);
    notify(ctx, NOTIFY_HASH, "hincrby", key);
    Ok(())
}

fn hincrbyfloat(ctx: &mut Ctx) -> CmdResult {
    let (key, f, incr) = (ctx.args.get(1), ctx.args.get(2), ctx.args.get(3));
    // The increment is checked first, on its own (Redis: "value is NaN or Infinity").
    match incr_long_double(None, incr) {
        Ok(_) => {}
        Err(LdError::NotFinite) => return Err(CmdError::err("value is NaN or Infinity")),
        Err(_) => return Err(CmdError::NotFloat),
    }
    let db = ctx.db();
    let lim = limits(ctx);
    let e = hash_for_write(ctx, key)?;
    let cur = hash::get(&ctx.srv.ks, e, f).map(|v| v.to_vec());
    let text = match incr_long_double(cur.as_deref(), incr) {
        Ok(t) => t,
        Err(LdError::BadCurrent) => return Err(CmdError::err("hash value is not a float")),
        Err(e) => return Err(e.into()),
    };
    hash::set(&mut ctx.srv.ks, db, e, f, &text, lim);
    ctx.dirty(1);
    ctx.out.bulk(&text);
    notify(ctx, NOTIFY_HASH, "hincrbyfloat", key);
    Ok(())
}

fn hrandfield(ctx: &mut Ctx) -> CmdResult {
    let key = ctx.args.get(1);
    if ctx.args.len() == 2 {
        let Some(e) = read_hash(ctx, key)? else {
            ctx.out.null();
            return Ok(());
        };
        match hash::random(&mut ctx.srv.ks, e) {
            Some((f, _)) => ctx.out.bulk(&f),
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
    let withvalues = match ctx.args.len() {
        3 => false,
        4 if ctx.args.is(3, "WITHVALUES") => true,
        _ => return Err(CmdError::Syntax),
    };
    let Some(e) = read_hash(ctx, key)? else {
        ctx.out.array(0);
        return Ok(());
    };
    let resp3 = ctx.client.resp == Resp::V3;
    let emit = |out: &mut crate::protocol::reply::Reply, f: &[u8], v: &[u8]| {
        if withvalues && resp3 {
            out.array(2);
        }
        out.bulk(f);
        if withvalues {
            out.bulk(v);
        }
    };
    let header = |out: &mut crate::protocol::reply::Reply, n: usize| {
        if withvalues && !resp3 {
            out.array(n * 2);
        } else {
            out.array(n);
        }
    };
    if l == 0 {
        ctx.out.array(0);
        return Ok(());
    }
    if l < 0 {
        let n = l.unsigned_abs();
        if n > super::MAX_RANDOM_REPEATS {
            return Err(CmdError::err("value is out of range"));
        }
        header(&mut ctx.out, n as usize);
        for _ in 0..n {
            if let Some((f, v)) = hash::random(&mut ctx.srv.ks, e) {
                emit(&mut ctx.out, &f, &v);
            }
        }
        return Ok(());
    }
    let len = hash::len(&ctx.srv.ks, e);
    let want = l as u64;
    if want.saturating_mul(3) <= len {
        // Few fields out of many (Redis's case 4): sample until enough distinct ones,
        // without copying the whole hash.
        let mut seen = std::collections::HashSet::new();
        let mut picked = Vec::with_capacity(want as usize);
        while (picked.len() as u64) < want {
            let Some((f, v)) = hash::random(&mut ctx.srv.ks, e) else {
                break;
            };
            if seen.insert(f.clone()) {
                picked.push((f, v));
            }
        }
        header(&mut ctx.out, picked.len());
        for (f, v) in &picked {
            emit(&mut ctx.out, f, v);
        }
        return Ok(());
    }
    let mut all = vec![];
    hash::for_each(&ctx.srv.ks, e, |f, v| all.push((f.to_vec(), v.to_vec())));
    let n = (l as u64).min(all.len() as u64) as usize;
    if n < all.len() {
        // Distinct fields: a partial Fisher-Yates shuffle.
        for i in 0..n {
            let j = i + ctx.srv.ks.rng.below((all.len() - i) as u64) as usize;
            all.swap(i, j);
        }
        all.truncate(n);
    }
    header(&mut ctx.out, n);
    for (f, v) in &all {
        emit(&mut ctx.out, f, v);
    }
    Ok(())
}

fn hscan(ctx: &mut Ctx) -> CmdResult {
    let cursor = super::keys::key_scan_cursor(ctx)?;
    let key = ctx.args.get(1);
    let Some(e) = read_hash(ctx, key)? else {
        super::keys::empty_scan_reply(ctx);
        return Ok(());
    };
    let (count, pattern) = super::keys::key_scan_opts(ctx)?;
    let (next, mut pairs) = hash::scan(&ctx.srv.ks, e, cursor, count);
    if let Some(p) = pattern {
        pairs.retain(|(f, _)| glob_match(p, f, false));
    }
    ctx.out.array(2);
    ctx.out.bulk(next.to_string().as_bytes());
    ctx.out.array(pairs.len() * 2);
    for (f, v) in &pairs {
        ctx.out.bulk(f);
        ctx.out.bulk(v);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::executor::{Client, Server};

    #[test]
    fn value_length_counts_integer_encodings_as_their_decimal_text() {
        assert_eq!(val_len(Val::Str(b"")), 0);
        assert_eq!(val_len(Val::Str(b"hello")), 5);
        assert_eq!(val_len(Val::Int(0)), 1);
        assert_eq!(val_len(Val::Int(-123)), 4);
        assert_eq!(val_len(Val::Int(i64::MAX)), 19);
        assert_eq!(val_len(Val::Int(i64::MIN)), 20);
    }

    use crate::commands::executor::testing::{bulks, run, sorted};

    fn setup() -> (Server, Box<Client>) {
        crate::commands::executor::testing::server_and_client()
    }

    #[test]
    fn hset_counts_new_fields_and_checks_pairs() {
        let (mut srv, mut c) = setup();
        let c = &mut *c;
        assert_eq!(
            run(&mut srv, c, &["HSET", "h", "a", "1", "a", "2"]),
            ":1\r\n"
        );
        assert_eq!(run(&mut srv, c, &["HGET", "h", "a"]), "$1\r\n2\r\n");
        assert_eq!(
            run(&mut srv, c, &["HSET", "h", "a", "3", "b", "4"]),
            ":1\r\n"
        );
        assert_eq!(
            run(&mut srv, c, &["HSET", "h", "a", "1", "b"]),
            "-ERR wrong number of arguments for 'hset' command\r\n"
        );
        assert_eq!(
            run(&mut srv, c, &["HMSET", "h", "a", "1", "b"]),
            "-ERR wrong number of arguments for 'hmset' command\r\n"
        );
        assert_eq!(run(&mut srv, c, &["HMSET", "h", "c", "5"]), "+OK\r\n");
        assert_eq!(run(&mut srv, c, &["HLEN", "h"]), ":3\r\n");
        assert_eq!(run(&mut srv, c, &["HSETNX", "h", "a", "x"]), ":0\r\n");
        assert_eq!(run(&mut srv, c, &["HGET", "h", "a"]), "$1\r\n3\r\n");
        assert_eq!(run(&mut srv, c, &["HSETNX", "h", "d", "x"]), ":1\r\n");
        assert_eq!(run(&mut srv, c, &["HSETNX", "new", "f", "v"]), ":1\r\n");
        assert_eq!(
            run(&mut srv, c, &["HMGET", "h", "a", "nope", "d"]),
            "*3\r\n$1\r\n3\r\n$-1\r\n$1\r\nx\r\n"
        );
        assert_eq!(
            run(&mut srv, c, &["HMGET", "nokey", "a", "b"]),
            "*2\r\n$-1\r\n$-1\r\n"
        );
    }

    #[test]
    fn hstrlen_of_integer_encoded_values() {
        let (mut srv, mut c) = setup();
        let c = &mut *c;
        run(
            &mut srv,
            c,
            &["HSET", "h", "n", "-123", "z", "0", "s", "text"],
        );
        assert_eq!(run(&mut srv, c, &["HSTRLEN", "h", "n"]), ":4\r\n");
        assert_eq!(run(&mut srv, c, &["HSTRLEN", "h", "z"]), ":1\r\n");
        assert_eq!(run(&mut srv, c, &["HSTRLEN", "h", "s"]), ":4\r\n");
        assert_eq!(run(&mut srv, c, &["HSTRLEN", "h", "nope"]), ":0\r\n");
        assert_eq!(run(&mut srv, c, &["HSTRLEN", "nokey", "n"]), ":0\r\n");
    }

    #[test]
    fn hdel_of_the_last_field_deletes_the_key() {
        let (mut srv, mut c) = setup();
        let c = &mut *c;
        run(&mut srv, c, &["HSET", "h", "a", "1", "b", "2"]);
        assert_eq!(run(&mut srv, c, &["HDEL", "h", "a", "nope", "a"]), ":1\r\n");
        assert_eq!(run(&mut srv, c, &["HEXISTS", "h", "a"]), ":0\r\n");
        assert_eq!(run(&mut srv, c, &["HDEL", "h", "b"]), ":1\r\n");
        assert_eq!(run(&mut srv, c, &["EXISTS", "h"]), ":0\r\n");
        assert_eq!(run(&mut srv, c, &["HDEL", "h", "b"]), ":0\r\n");
    }

    #[test]
    fn hincrby_overflow_and_non_integers_leave_the_hash_unchanged() {
        let (mut srv, mut c) = setup();
        let c = &mut *c;
        assert_eq!(run(&mut srv, c, &["HINCRBY", "h", "n", "5"]), ":5\r\n");
        assert_eq!(run(&mut srv, c, &["HINCRBY", "h", "n", "-7"]), ":-2\r\n");
        run(
            &mut srv,
            c,
            &["HSET", "h", "max", "9223372036854775807", "s", "abc"],
        );
        assert_eq!(
            run(&mut srv, c, &["HINCRBY", "h", "max", "1"]),
            "-ERR increment or decrement would overflow\r\n"
        );
        assert_eq!(
            run(&mut srv, c, &["HGET", "h", "max"]),
            "$19\r\n9223372036854775807\r\n"
        );
        assert_eq!(
            run(&mut srv, c, &["HINCRBY", "h", "s", "1"]),
            "-ERR hash value is not an integer\r\n"
        );
        // A bad increment is refused before the key is created.
        assert_eq!(
            run(&mut srv, c, &["HINCRBY", "new", "f", "x"]),
            "-ERR value is not an integer or out of range\r\n"
        );
        assert_eq!(run(&mut srv, c, &["EXISTS", "new"]), ":0\r\n");
    }

    #[test]
    fn hincrbyfloat_checks_the_increment_first_then_the_value() {
        let (mut srv, mut c) = setup();
        let c = &mut *c;
        assert_eq!(
            run(&mut srv, c, &["HINCRBYFLOAT", "h", "f", "1.5"]),
            "$3\r\n1.5\r\n"
        );
        assert_eq!(
            run(&mut srv, c, &["HINCRBYFLOAT", "h", "f", "1.5"]),
            "$1\r\n3\r\n"
        );
        for bad in ["inf", "-inf"] {
            assert_eq!(
                run(&mut srv, c, &["HINCRBYFLOAT", "new", "f", bad]),
                "-ERR value is NaN or Infinity\r\n",
                "{bad}"
            );
        }
        assert_eq!(
            run(&mut srv, c, &["HINCRBYFLOAT", "new", "f", "abc"]),
            "-ERR value is not a valid float\r\n"
        );
        assert_eq!(run(&mut srv, c, &["EXISTS", "new"]), ":0\r\n");
        run(&mut srv, c, &["HSET", "h", "s", "abc"]);
        assert_eq!(
            run(&mut srv, c, &["HINCRBYFLOAT", "h", "s", "1"]),
            "-ERR hash value is not a float\r\n"
        );
        assert_eq!(run(&mut srv, c, &["HGET", "h", "f"]), "$1\r\n3\r\n");
    }

    #[test]
    fn hgetall_keys_vals_agree_across_an_encoding_conversion() {
        let (mut srv, mut c) = setup();
        let c = &mut *c;
        assert_eq!(
            run(
                &mut srv,
                c,
                &["CONFIG", "SET", "hash-max-listpack-entries", "2"]
            ),
            "+OK\r\n"
        );
        assert_eq!(run(&mut srv, c, &["HGETALL", "h"]), "*0\r\n");
        // The third field converts the hash in the middle of one HSET.
        assert_eq!(
            run(&mut srv, c, &["HSET", "h", "a", "1", "b", "2", "c", "3"]),
            ":3\r\n"
        );
        assert_eq!(run(&mut srv, c, &["HLEN", "h"]), ":3\r\n");
        let all = bulks(&run(&mut srv, c, &["HGETALL", "h"]));
        let mut pairs: Vec<(String, String)> = all
            .chunks(2)
            .map(|p| (p[0].clone(), p[1].clone()))
            .collect();
        pairs.sort();
        assert_eq!(
            pairs,
            [("a", "1"), ("b", "2"), ("c", "3")].map(|(f, v)| (f.to_string(), v.to_string()))
        );
        assert_eq!(
            sorted(bulks(&run(&mut srv, c, &["HKEYS", "h"]))),
            ["a", "b", "c"]
        );
        assert_eq!(
            sorted(bulks(&run(&mut srv, c, &["HVALS", "h"]))),
            ["1", "2", "3"]
        );
        // A long value converts too (hash-max-listpack-value).
        run(
            &mut srv,
            c,
            &["CONFIG", "SET", "hash-max-listpack-value", "4"],
        );
        run(&mut srv, c, &["HSET", "h2", "f", "123456789", "g", "x"]);
        assert_eq!(
            run(&mut srv, c, &["HGET", "h2", "f"]),
            "$9\r\n123456789\r\n"
        );
        assert_eq!(run(&mut srv, c, &["HGET", "h2", "g"]), "$1\r\nx\r\n");
    }

    #[test]
    fn hrandfield_counts_repeats_distinct_and_errors() {
        let (mut srv, mut c) = setup();
        let c = &mut *c;
        assert_eq!(run(&mut srv, c, &["HRANDFIELD", "nokey"]), "$-1\r\n");
        assert_eq!(run(&mut srv, c, &["HRANDFIELD", "nokey", "3"]), "*0\r\n");
        let mut args = vec!["HSET".to_string(), "h".to_string()];
        for i in 0..10 {
            args.push(format!("f{i}"));
            args.push(format!("v{i}"));
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        run(&mut srv, c, &args);
        assert_eq!(run(&mut srv, c, &["HRANDFIELD", "h", "0"]), "*0\r\n");
        // Negative: exactly that many, repeats allowed.
        let r = bulks(&run(&mut srv, c, &["HRANDFIELD", "h", "-25"]));
        assert_eq!(r.len(), 25);
        assert!(r.iter().all(|f| f.starts_with('f')));
        // Positive: distinct fields, at most all of them, on every path (few of many,
        // most of them, more than there are).
        for n in [2usize, 3, 7, 10, 50] {
            let r = bulks(&run(&mut srv, c, &["HRANDFIELD", "h", &n.to_string()]));
            let mut d = r.clone();
            d.sort();
            d.dedup();
            assert_eq!(r.len(), n.min(10), "count {n}");
            assert_eq!(d.len(), r.len(), "count {n}: repeats in {r:?}");
        }
        // WITHVALUES: every field with its own value.
        for n in ["-4", "4", "20"] {
            let r = bulks(&run(&mut srv, c, &["HRANDFIELD", "h", n, "WITHVALUES"]));
            assert!(!r.is_empty() && r.len().is_multiple_of(2));
            for p in r.chunks(2) {
                assert_eq!(p[0][1..], p[1][1..], "{p:?}");
            }
        }
        c.resp = crate::protocol::reply::Resp::V3;
        assert!(
            run(&mut srv, c, &["HRANDFIELD", "h", "1", "WITHVALUES"]).starts_with("*1\r\n*2\r\n")
        );
        c.resp = crate::protocol::reply::Resp::V2;
        assert!(run(&mut srv, c, &["HRANDFIELD", "h", "1", "WITHVALUES"]).starts_with("*2\r\n$"));
        assert_eq!(
            run(&mut srv, c, &["HRANDFIELD", "h", "-9223372036854775808"]),
            "-ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807\r\n"
        );
        assert_eq!(
            run(&mut srv, c, &["HRANDFIELD", "h", "x"]),
            "-ERR value is not an integer or out of range\r\n"
        );
        assert_eq!(
            run(&mut srv, c, &["HRANDFIELD", "h", "1", "WITHVALUE"]),
            "-ERR syntax error\r\n"
        );
    }
}
