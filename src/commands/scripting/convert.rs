//! Conversions between Redis replies and Lua values, as Redis 7.0's script_lua.c does
//! them.
//!
//! Reply → Lua (what `redis.call` returns): integer → number, bulk → string, null bulk
//! and null array → false, status → `{ok=...}`, error → `{err=...}`, array → table;
//! RESP3 (after `redis.setresp(3)`): map → `{map={...}}`, set → `{set={k=true}}`, null →
//! nil, boolean → boolean, double → `{double=n}`, big number → `{big_number=s}`, verbatim
//! → `{verbatim_string={format=..., string=...}}`, attributes skipped.
//!
//! Lua → reply (what the script returns): number → integer (truncated as C casts),
//! string → bulk, true → 1 (a RESP3 boolean when the script chose RESP3), false and nil
//! → null, tables: `err` → error, `ok` → status, `double`, `big_number`,
//! `verbatim_string`, `map`, `set`, else an array up to the first nil.

use crate::protocol::reply::{Reply, Resp};
use mlua::{Lua, Table, Value};

/// Nesting at which a returned table becomes an error element: where Redis 7.0 runs
/// out of Lua stack (`lua_checkstack` at LUAI_MAXCSTACK) for nested arrays, with the
/// same text.
pub const MAX_REPLY_DEPTH: usize = 7995;

/// A parsed reply could not be read (never expected from the server's own encoder).
#[derive(Debug)]
pub struct BadReply;

fn line(buf: &[u8], pos: usize) -> Result<(&[u8], usize), BadReply> {
    let rest = buf.get(pos..).ok_or(BadReply)?;
    let end = rest.windows(2).position(|w| w == b"\r\n").ok_or(BadReply)?;
    Ok((&rest[..end], pos + end + 2))
}

fn int_of(b: &[u8]) -> Result<i64, BadReply> {
    crate::util::parse_i64(b).ok_or(BadReply)
}

fn tagged(lua: &Lua, field: &str, v: Value) -> mlua::Result<Value> {
    let t = lua.create_table()?;
    t.raw_set(field, v)?;
    Ok(Value::Table(t))
}

/// Parses the reply at `buf[pos..]` into a Lua value; returns it and where it ends.
/// Errors become `{err = text}` tables (the caller decides whether to raise them).
pub fn reply_to_lua(lua: &Lua, buf: &[u8], pos: usize) -> Result<(Value, usize), BadReply> {
    let kind = *buf.get(pos).ok_or(BadReply)?;
    let (head, mut next) = line(buf, pos + 1)?;
    let lv = |r: mlua::Result<Value>| r.map_err(|_| BadReply);
    let v = match kind {
        b':' => Value::Integer(int_of(head)?),
        b'+' => lv(lua
            .create_string(head)
            .and_then(|s| tagged(lua, "ok", Value::String(s))))?,
        b'-' => lv(lua
            .create_string(head)
            .and_then(|s| tagged(lua, "err", Value::String(s))))?,
        b'$' | b'=' => {
            let n = int_of(head)?;
            if n < 0 {
                return Ok((Value::Boolean(false), next));
            }
            let n = n as usize;
            let data = buf.get(next..next + n).ok_or(BadReply)?;
            next += n + 2;
            if kind == b'=' {
                let (format, text) = if data.len() >= 4 && data[3] == b':' {
                    (&data[..3], &data[4..])
                } else {
                    (&b"txt"[..], data)
                };
                let inner = lv(lua.create_table().map(Value::Table))?;
                if let Value::Table(t) = &inner {
                    lv(lua
                        .create_string(format)
                        .and_then(|f| t.raw_set("format", f))
                        .map(|_| Value::Nil))?;
                    lv(lua
                        .create_string(text)
                        .and_then(|s| t.raw_set("string", s))
                        .map(|_| Value::Nil))?;
                }
                lv(tagged(lua, "verbatim_string", inner))?
            } else {
                Value::String(lua.create_string(data).map_err(|_| BadReply)?)
            }
        }
        b'(' => lv(lua
            .create_string(head)
            .and_then(|s| tagged(lua, "big_number", Value::String(s))))?,
        b'_' => Value::Nil,
        b'#' => Value::Boolean(head == b"t"),
        b',' => {
            let s = std::str::from_utf8(head).map_err(|_| BadReply)?;
            let d = match s {
                "inf" => f64::INFINITY,
                "-inf" => f64::NEG_INFINITY,
                "nan" | "-nan" => f64::NAN,
                _ => s.parse::<f64>().map_err(|_| BadReply)?,
            };
            lv(tagged(lua, "double", Value::Number(d)))?
        }
        b'*' | b'~' | b'>' => {
            let n = int_of(head)?;
            if n < 0 {
                return Ok((Value::Boolean(false), next));
            }
            let t = lua.create_table().map_err(|_| BadReply)?;
            for i in 0..n as usize {
                let (e, after) = reply_to_lua(lua, buf, next)?;
                next = after;
                if kind == b'~' {
                    t.raw_set(e, true).map_err(|_| BadReply)?;
                } else {
                    t.raw_set(i + 1, e).map_err(|_| BadReply)?;
                }
            }
            if kind == b'~' {
                lv(tagged(lua, "set", Value::Table(t)))?
            } else {
                Value::Table(t)
            }
        }
        b'%' | b'|' => {
            let n = int_of(head)?;
            let t = lua.create_table().map_err(|_| BadReply)?;
            for _ in 0..n.max(0) {
                let (k, after) = reply_to_lua(lua, buf, next)?;
                let (v, after) = reply_to_lua(lua, buf, after)?;
                next = after;
                if !matches!(k, Value::Nil) {
                    t.raw_set(k, v).map_err(|_| BadReply)?;
                }
            }
            if kind == b'|' {
                // An attribute only annotates the reply that follows it.
                return reply_to_lua(lua, buf, next);
            }
            lv(tagged(lua, "map", Value::Table(t)))?
        }
        _ => return Err(BadReply),
    };
    Ok((v, next))
}

/// C's `(long long)` of a double on x86-64: out of range (and NaN) is INT64_MIN.
pub fn c_cast_i64(v: f64) -> i64 {
    if !(-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&v) {
        i64::MIN
    } else {
        v as i64
    }
}

/// Writes the script's return value `v` as a reply. `script_resp` is the protocol the
/// script chose with `redis.setresp` (it decides how booleans are sent). Iterative (an
/// explicit stack), so a deep table costs heap, not the executor's stack.
pub fn lua_to_reply(v: &Value, out: &mut Reply, script_resp: u8) {
    let mut todo: Vec<(Value, usize)> = vec![(v.clone(), 0)];
    while let Some((v, depth)) = todo.pop() {
        if depth >= MAX_REPLY_DEPTH {
            out.error("ERR reached lua stack limit");
            continue;
        }
        match v {
            Value::String(s) => out.bulk(&s.as_bytes()),
            Value::Boolean(b) => {
                if script_resp == 2 {
                    if b {
                        out.int(1);
                    } else {
                        out.null();
                    }
                } else {
                    out.boolean(b);
                }
            }
            Value::Integer(i) => out.int(i),
            Value::Number(n) => out.int(c_cast_i64(n)),
            Value::Table(t) => {
                // Children go on the stack last-first, so they come out in order.
                let children = table_to_reply(&t, out);
                todo.extend(children.into_iter().rev().map(|c| (c, depth + 1)));
            }
            _ => out.null(),
        }
    }
}

fn field(t: &Table, name: &str) -> Value {
    t.raw_get::<Value>(name).unwrap_or(Value::Nil)
}

/// Writes a table's reply, or its aggregate header; returns the elements still to
/// write (in order).
fn table_to_reply(t: &Table, out: &mut Reply) -> Vec<Value> {
    if let Value::String(e) = field(t, "err") {
        out.error_bytes(&e.as_bytes());
        return Vec::new();
    }
    if let Value::String(s) = field(t, "ok") {
        let s = s.as_bytes();
        out.buf.push(b'+');
        out.buf.extend(
            s.iter()
                .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
        );
        out.buf.extend_from_slice(b"\r\n");
        return Vec::new();
    }
    match field(t, "double") {
        Value::Integer(i) => {
            out.double(i as f64);
            return Vec::new();
        }
        Value::Number(n) => {
            out.double(n);
            return Vec::new();
        }
        _ => {}
    }
    if let Value::String(s) = field(t, "big_number") {
        let s: Vec<u8> = s
            .as_bytes()
            .iter()
            .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b })
            .collect();
        match out.resp {
            Resp::V2 => out.bulk(&s),
            Resp::V3 => {
                out.buf.push(b'(');
                out.buf.extend_from_slice(&s);
                out.buf.extend_from_slice(b"\r\n");
            }
        }
        return Vec::new();
    }
    if let Value::Table(vt) = field(t, "verbatim_string") {
        if let (Value::String(f), Value::String(s)) = (field(&vt, "format"), field(&vt, "string")) {
            let (f, s) = (f.as_bytes(), s.as_bytes());
            match out.resp {
                Resp::V2 => out.bulk(&s),
                Resp::V3 => {
                    let mut body = f.to_vec();
                    body.push(b':');
                    body.extend_from_slice(&s);
                    out.buf.push(b'=');
                    out.buf.extend_from_slice(body.len().to_string().as_bytes());
                    out.buf.extend_from_slice(b"\r\n");
                    out.buf.extend_from_slice(&body);
                    out.buf.extend_from_slice(b"\r\n");
                }
            }
            return Vec::new();
        }
    }
    if let Value::Table(m) = field(t, "map") {
        let pairs: Vec<(Value, Value)> = m.pairs::<Value, Value>().filter_map(Result::ok).collect();
        out.map(pairs.len());
        return pairs.into_iter().flat_map(|(k, v)| [k, v]).collect();
    }
    if let Value::Table(s) = field(t, "set") {
        let keys: Vec<Value> = s
            .pairs::<Value, Value>()
            .filter_map(Result::ok)
            .map(|(k, _)| k)
            .collect();
        out.set(keys.len());
        return keys;
    }
    let mut items = Vec::new();
    loop {
        match t.raw_get::<Value>(items.len() + 1) {
            Ok(Value::Nil) | Err(_) => break,
            Ok(v) => items.push(v),
        }
    }
    out.array(items.len());
    items
}

/// Appends a `redis.call` argument to `out`: strings as they are, numbers as Redis
/// formats them (`%.17g`); false for any other type.
pub fn push_call_arg(v: &Value, out: &mut Vec<u8>) -> bool {
    match v {
        Value::String(s) => out.extend_from_slice(&s.as_bytes()),
        Value::Integer(i) => {
            use std::io::Write;
            let _ = write!(out, "{i}");
        }
        Value::Number(n) => out.extend_from_slice(super::lualib::fmt_g(*n, 17).as_bytes()),
        _ => return false,
    }
    true
}

/// [`push_call_arg`] into a vector of its own; None for a type that is not an argument.
pub fn call_arg(v: &Value) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    push_call_arg(v, &mut out).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn to_reply(lua: &Lua, code: &str, client: Resp, script_resp: u8) -> String {
        let v: Value = lua.load(code).eval().unwrap();
        let mut buf = Vec::new();
        let mut r = Reply::new(&mut buf, client);
        lua_to_reply(&v, &mut r, script_resp);
        String::from_utf8_lossy(&buf).into_owned()
    }

    #[test]
    fn lua_values_to_resp2() {
        let lua = Lua::new();
        let r = |c: &str| to_reply(&lua, c, Resp::V2, 2);
        assert_eq!(r("return 1"), ":1\r\n");
        assert_eq!(r("return 3.99"), ":3\r\n");
        assert_eq!(r("return -3.7"), ":-3\r\n");
        assert_eq!(r("return 1e300"), ":-9223372036854775808\r\n");
        assert_eq!(r("return math.huge"), ":-9223372036854775808\r\n");
        assert_eq!(r("return 'x'"), "$1\r\nx\r\n");
        assert_eq!(r("return true"), ":1\r\n");
        assert_eq!(r("return false"), "$-1\r\n");
        assert_eq!(r("return nil"), "$-1\r\n");
        assert_eq!(r("return {1,2,3,nil,4}"), "*3\r\n:1\r\n:2\r\n:3\r\n");
        assert_eq!(r("return {err='My Error'}"), "-My Error\r\n");
        assert_eq!(r("return {ok='fine'}"), "+fine\r\n");
        assert_eq!(r("return {ok=1}"), "*0\r\n");
        assert_eq!(
            r("return {1,{2,{3}}}"),
            "*2\r\n:1\r\n*2\r\n:2\r\n*1\r\n:3\r\n"
        );
        assert_eq!(r("return {double=1.5}"), "$3\r\n1.5\r\n");
        assert_eq!(r("return {map={a=1}}"), "*2\r\n$1\r\na\r\n:1\r\n");
        let deep = r("local t = {} t[1] = t return t");
        assert!(deep.ends_with("-ERR reached lua stack limit\r\n"));
        // Redis 7.0 sends 7995 levels before the error.
        assert_eq!(deep.matches("*1\r\n").count(), 7995);
    }

    #[test]
    fn lua_values_to_resp3() {
        let lua = Lua::new();
        assert_eq!(to_reply(&lua, "return true", Resp::V3, 3), "#t\r\n");
        assert_eq!(to_reply(&lua, "return false", Resp::V3, 3), "#f\r\n");
        assert_eq!(to_reply(&lua, "return true", Resp::V3, 2), ":1\r\n");
        assert_eq!(to_reply(&lua, "return false", Resp::V3, 2), "_\r\n");
        assert_eq!(to_reply(&lua, "return true", Resp::V2, 3), ":1\r\n");
        assert_eq!(
            to_reply(&lua, "return {map={a=1}}", Resp::V3, 2),
            "%1\r\n$1\r\na\r\n:1\r\n"
        );
        assert_eq!(
            to_reply(&lua, "return {set={a=true}}", Resp::V3, 2),
            "~1\r\n$1\r\na\r\n"
        );
        assert_eq!(
            to_reply(&lua, "return {double=1.5}", Resp::V3, 2),
            ",1.5\r\n"
        );
        assert_eq!(
            to_reply(&lua, "return {big_number='123'}", Resp::V3, 2),
            "(123\r\n"
        );
        assert_eq!(
            to_reply(
                &lua,
                "return {verbatim_string={format='txt', string='hi'}}",
                Resp::V3,
                2
            ),
            "=6\r\ntxt:hi\r\n"
        );
    }

    #[test]
    fn replies_to_lua() {
        let lua = Lua::new();
        let conv = |bytes: &[u8]| reply_to_lua(&lua, bytes, 0).unwrap();
        let (v, end) = conv(b":5\r\n");
        assert_eq!(end, 4);
        assert!(matches!(v, Value::Integer(5)));
        assert!(matches!(conv(b"$-1\r\n").0, Value::Boolean(false)));
        assert!(matches!(conv(b"*-1\r\n").0, Value::Boolean(false)));
        assert!(matches!(conv(b"_\r\n").0, Value::Nil));
        assert!(matches!(conv(b"#t\r\n").0, Value::Boolean(true)));
        let Value::Table(t) = conv(b"+OK\r\n").0 else {
            panic!()
        };
        assert_eq!(t.raw_get::<String>("ok").unwrap(), "OK");
        let Value::Table(t) = conv(b"-ERR x\r\n").0 else {
            panic!()
        };
        assert_eq!(t.raw_get::<String>("err").unwrap(), "ERR x");
        let Value::Table(t) = conv(b"*3\r\n$1\r\na\r\n$-1\r\n:2\r\n").0 else {
            panic!()
        };
        assert_eq!(t.raw_len(), 3);
        assert!(matches!(
            t.raw_get::<Value>(2).unwrap(),
            Value::Boolean(false)
        ));
        let Value::Table(t) = conv(b"%1\r\n$1\r\nk\r\n:1\r\n").0 else {
            panic!()
        };
        let m: Table = t.raw_get("map").unwrap();
        assert_eq!(m.raw_get::<i64>("k").unwrap(), 1);
        let Value::Table(t) = conv(b"~1\r\n$1\r\nk\r\n").0 else {
            panic!()
        };
        let s: Table = t.raw_get("set").unwrap();
        assert!(s.raw_get::<bool>("k").unwrap());
        let Value::Table(t) = conv(b",1.5\r\n").0 else {
            panic!()
        };
        assert_eq!(t.raw_get::<f64>("double").unwrap(), 1.5);
        let Value::Table(t) = conv(b"=6\r\ntxt:hi\r\n").0 else {
            panic!()
        };
        let vt: Table = t.raw_get("verbatim_string").unwrap();
        assert_eq!(vt.raw_get::<String>("string").unwrap(), "hi");
        assert!(reply_to_lua(&lua, b"$5\r\nab", 0).is_err());
        assert!(reply_to_lua(&lua, b"", 0).is_err());
    }

    #[test]
    fn call_arguments() {
        assert_eq!(call_arg(&Value::Integer(3)).unwrap(), b"3");
        assert_eq!(call_arg(&Value::Number(1.5)).unwrap(), b"1.5");
        assert_eq!(
            call_arg(&Value::Number(0.1)).unwrap(),
            b"0.10000000000000001"
        );
        assert!(call_arg(&Value::Boolean(true)).is_none());
        assert!(call_arg(&Value::Nil).is_none());
    }
}
