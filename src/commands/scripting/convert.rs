//! Conversions between Redis replies and Lua values, as Redis 7.0's script_lua.c does
//! them.
//!
//! Reply → Lua (what `redis.call` returns, built by `raw_call.rs`): integer → number, bulk → string, null bulk
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
use mlua::{Table, Value};

/// Nesting at which a returned table becomes an error element: where Redis 7.0 runs
/// out of Lua stack (`lua_checkstack` at LUAI_MAXCSTACK) for nested arrays, with the
/// same text.
pub const MAX_REPLY_DEPTH: usize = 7995;

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

#[cfg(test)]
mod tests {
    use super::*;
    use mlua::Lua;

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
}
