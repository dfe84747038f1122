//! The `cjson` library of Redis's Lua (lua-cjson 2.1 with Redis's defaults): `encode`,
//! `decode`, `null`. Numbers are written with `%.14g`; a table is an array when its keys
//! are the integers 1..n (holes become `null`, an excessively sparse one is refused) and
//! an object otherwise; nesting deeper than 1000 is refused both ways.

use super::lualib::{arg_error, fmt_g, number, raise_at, type_name};
use mlua::{LightUserData, Lua, MultiValue, Table, Value};

const MAX_DEPTH: usize = 1000;
/// lua-cjson's `encode_sparse_array` defaults: convert off, ratio 2, safe 10.
const SPARSE_RATIO: usize = 2;
const SPARSE_SAFE: usize = 10;

pub fn null() -> Value {
    Value::LightUserData(LightUserData(std::ptr::null_mut()))
}

fn is_null(v: &Value) -> bool {
    matches!(v, Value::LightUserData(p) if p.0.is_null())
}

pub fn table(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set(
        "encode",
        lua.create_function(|lua, args: MultiValue| {
            if args.len() != 1 {
                return Err(raise_at(
                    lua,
                    "bad argument #1 to 'encode' (expected 1 argument)",
                ));
            }
            let mut out = Vec::new();
            encode(lua, &args[0], 0, &mut out)?;
            Ok(Value::String(lua.create_string(&out)?))
        })?,
    )?;
    t.raw_set(
        "decode",
        lua.create_function(|lua, args: MultiValue| {
            if args.len() != 1 {
                return Err(raise_at(
                    lua,
                    "bad argument #1 to 'decode' (expected 1 argument)",
                ));
            }
            let text = match &args[0] {
                Value::String(s) => s.as_bytes().to_vec(),
                Value::Integer(i) => i.to_string().into_bytes(),
                Value::Number(n) => fmt_g(*n, 14).into_bytes(),
                other => {
                    return Err(arg_error(
                        lua,
                        1,
                        "decode",
                        &format!("string expected, got {}", type_name(Some(other))),
                    ))
                }
            };
            let mut p = Parser {
                s: &text,
                pos: 0,
                depth: 0,
            };
            let v = p.value(lua)?;
            let (tok, at) = p.token();
            if tok != Tok::End {
                return Err(p.expected(lua, "the end", tok, at));
            }
            Ok(v)
        })?,
    )?;
    t.raw_set("null", null())?;
    Ok(t)
}

fn encode(lua: &Lua, v: &Value, depth: usize, out: &mut Vec<u8>) -> mlua::Result<()> {
    match v {
        Value::Nil => out.extend_from_slice(b"null"),
        v if is_null(v) => out.extend_from_slice(b"null"),
        Value::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Integer(i) => out.extend_from_slice(i.to_string().as_bytes()),
        Value::Number(n) => {
            if !n.is_finite() {
                return Err(raise_at(
                    lua,
                    "Cannot serialise number: must not be NaN or Inf",
                ));
            }
            out.extend_from_slice(fmt_g(*n, 14).as_bytes());
        }
        Value::String(s) => encode_string(&s.as_bytes(), out),
        Value::Table(t) => {
            let depth = depth + 1;
            if depth > MAX_DEPTH {
                return Err(raise_at(
                    lua,
                    &format!("Cannot serialise, excessive nesting ({depth})"),
                ));
            }
            match array_length(lua, t)? {
                Some(n) if n > 0 => {
                    out.push(b'[');
                    for i in 1..=n {
                        if i > 1 {
                            out.push(b',');
                        }
                        let e: Value = t.raw_get(i)?;
                        encode(lua, &e, depth, out)?;
                    }
                    out.push(b']');
                }
                _ => {
                    out.push(b'{');
                    let mut first = true;
                    for pair in t.pairs::<Value, Value>() {
                        let (k, val) = pair?;
                        if !first {
                            out.push(b',');
                        }
                        first = false;
                        match &k {
                            Value::String(s) => encode_string(&s.as_bytes(), out),
                            Value::Integer(i) => encode_string(i.to_string().as_bytes(), out),
                            Value::Number(n) => encode_string(fmt_g(*n, 14).as_bytes(), out),
                            other => {
                                return Err(raise_at(
                                    lua,
                                    &format!(
                                        "Cannot serialise {}: table key must be a number or string",
                                        type_name(Some(other))
                                    ),
                                ))
                            }
                        }
                        out.push(b':');
                        encode(lua, &val, depth, out)?;
                    }
                    out.push(b'}');
                }
            }
        }
        other => {
            return Err(raise_at(
                lua,
                &format!(
                    "Cannot serialise {}: type not supported",
                    type_name(Some(other))
                ),
            ))
        }
    }
    Ok(())
}

/// lua-cjson's `lua_array_length`: Some(max key) when every key is a positive integer,
/// None for an object; an excessively sparse array is an error.
fn array_length(lua: &Lua, t: &Table) -> mlua::Result<Option<usize>> {
    let mut max = 0usize;
    let mut items = 0usize;
    for pair in t.pairs::<Value, Value>() {
        let (k, _) = pair?;
        let idx = match k {
            Value::Integer(i) if i >= 1 => i as usize,
            Value::Number(n) if n >= 1.0 && n.fract() == 0.0 && n < 1e15 => n as usize,
            _ => return Ok(None),
        };
        max = max.max(idx);
        items += 1;
    }
    if max > SPARSE_SAFE && max > items * SPARSE_RATIO {
        return Err(raise_at(
            lua,
            "Cannot serialise table: excessively sparse array",
        ));
    }
    Ok(Some(max))
}

fn encode_string(s: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &c in s {
        match c {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' => out.extend_from_slice(b"\\/"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            8 => out.extend_from_slice(b"\\b"),
            12 => out.extend_from_slice(b"\\f"),
            c if c < 0x20 || c == 0x7f => {
                out.extend_from_slice(format!("\\u{c:04x}").as_bytes());
            }
            c => out.push(c),
        }
    }
    out.push(b'"');
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    ObjBegin,
    ObjEnd,
    ArrBegin,
    ArrEnd,
    Str(Vec<u8>),
    Num(f64),
    Bool(bool),
    Null,
    Colon,
    Comma,
    End,
    Error(&'static str),
}

impl Tok {
    fn name(&self) -> &'static str {
        match self {
            Tok::ObjBegin => "T_OBJ_BEGIN",
            Tok::ObjEnd => "T_OBJ_END",
            Tok::ArrBegin => "T_ARR_BEGIN",
            Tok::ArrEnd => "T_ARR_END",
            Tok::Str(_) => "T_STRING",
            Tok::Num(_) => "T_NUMBER",
            Tok::Bool(_) => "T_BOOLEAN",
            Tok::Null => "T_NULL",
            Tok::Colon => "T_COLON",
            Tok::Comma => "T_COMMA",
            Tok::End => "T_END",
            Tok::Error(e) => e,
        }
    }
}

struct Parser<'a> {
    s: &'a [u8],
    pos: usize,
    depth: usize,
}

impl Parser<'_> {
    /// The next token and the 1-based character where it starts.
    fn token(&mut self) -> (Tok, usize) {
        while self
            .s
            .get(self.pos)
            .is_some_and(|c| matches!(c, b' ' | b'\t' | b'\n' | b'\r'))
        {
            self.pos += 1;
        }
        let at = self.pos + 1;
        let Some(&c) = self.s.get(self.pos) else {
            return (Tok::End, at);
        };
        let single = |t: Tok, p: &mut Self| {
            p.pos += 1;
            (t, at)
        };
        match c {
            b'{' => single(Tok::ObjBegin, self),
            b'}' => single(Tok::ObjEnd, self),
            b'[' => single(Tok::ArrBegin, self),
            b']' => single(Tok::ArrEnd, self),
            b':' => single(Tok::Colon, self),
            b',' => single(Tok::Comma, self),
            b'"' => (self.string(), at),
            b'-' | b'0'..=b'9' => (self.number(), at),
            _ => {
                for (word, tok) in [
                    (&b"true"[..], Tok::Bool(true)),
                    (b"false", Tok::Bool(false)),
                    (b"null", Tok::Null),
                ] {
                    if self.s[self.pos..].starts_with(word) {
                        self.pos += word.len();
                        return (tok, at);
                    }
                }
                (Tok::Error("invalid token"), at)
            }
        }
    }

    fn number(&mut self) -> Tok {
        let start = self.pos;
        while self
            .s
            .get(self.pos)
            .is_some_and(|c| matches!(c, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E'))
        {
            self.pos += 1;
        }
        let text = std::str::from_utf8(&self.s[start..self.pos]).unwrap_or("");
        match text.parse::<f64>() {
            Ok(v) => Tok::Num(v),
            Err(_) => Tok::Error("invalid number"),
        }
    }

    fn hex4(&mut self) -> Option<u32> {
        let h = self.s.get(self.pos..self.pos + 4)?;
        let v = u32::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok()?;
        self.pos += 4;
        Some(v)
    }

    fn string(&mut self) -> Tok {
        self.pos += 1;
        let mut out = Vec::new();
        loop {
            let Some(&c) = self.s.get(self.pos) else {
                return Tok::Error("unexpected end of string");
            };
            self.pos += 1;
            match c {
                b'"' => return Tok::Str(out),
                b'\\' => {
                    let Some(&e) = self.s.get(self.pos) else {
                        return Tok::Error("unexpected end of string");
                    };
                    self.pos += 1;
                    match e {
                        b'"' | b'\\' | b'/' => out.push(e),
                        b'b' => out.push(8),
                        b'f' => out.push(12),
                        b'n' => out.push(b'\n'),
                        b'r' => out.push(b'\r'),
                        b't' => out.push(b'\t'),
                        b'u' => {
                            let Some(mut cp) = self.hex4() else {
                                return Tok::Error("invalid unicode escape code");
                            };
                            if (0xD800..0xDC00).contains(&cp) {
                                // A high surrogate needs its low half.
                                if self.s.get(self.pos..self.pos + 2) != Some(b"\\u") {
                                    return Tok::Error("invalid unicode escape code");
                                }
                                self.pos += 2;
                                match self.hex4() {
                                    Some(lo) if (0xDC00..0xE000).contains(&lo) => {
                                        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                                    }
                                    _ => return Tok::Error("invalid unicode escape code"),
                                }
                            } else if (0xDC00..0xE000).contains(&cp) {
                                return Tok::Error("invalid unicode escape code");
                            }
                            let ch = char::from_u32(cp).unwrap_or('\u{FFFD}');
                            let mut b = [0u8; 4];
                            out.extend_from_slice(ch.encode_utf8(&mut b).as_bytes());
                        }
                        _ => return Tok::Error("invalid escape code"),
                    }
                }
                c => out.push(c),
            }
        }
    }

    fn expected(&self, lua: &Lua, what: &str, found: Tok, at: usize) -> mlua::Error {
        raise_at(
            lua,
            &format!(
                "Expected {what} but found {} at character {at}",
                found.name()
            ),
        )
    }

    fn value(&mut self, lua: &Lua) -> mlua::Result<Value> {
        let (tok, at) = self.token();
        self.value_from(lua, tok, at)
    }

    fn value_from(&mut self, lua: &Lua, tok: Tok, at: usize) -> mlua::Result<Value> {
        match tok {
            Tok::Str(s) => Ok(Value::String(lua.create_string(&s)?)),
            Tok::Num(n) => Ok(number(n)),
            Tok::Bool(b) => Ok(Value::Boolean(b)),
            Tok::Null => Ok(null()),
            Tok::ObjBegin | Tok::ArrBegin => {
                self.depth += 1;
                if self.depth > MAX_DEPTH {
                    return Err(raise_at(
                        lua,
                        &format!(
                            "Found too many nested data structures ({}) at character {at}",
                            self.depth
                        ),
                    ));
                }
                let v = if tok == Tok::ObjBegin {
                    self.object(lua)?
                } else {
                    self.array(lua)?
                };
                self.depth -= 1;
                Ok(v)
            }
            other => Err(self.expected(lua, "value", other, at)),
        }
    }

    fn array(&mut self, lua: &Lua) -> mlua::Result<Value> {
        let t = lua.create_table()?;
        let (mut tok, mut at) = self.token();
        if tok == Tok::ArrEnd {
            return Ok(Value::Table(t));
        }
        let mut i = 1;
        loop {
            let v = self.value_from(lua, tok, at)?;
            t.raw_set(i, v)?;
            i += 1;
            let (sep, sat) = self.token();
            match sep {
                Tok::ArrEnd => return Ok(Value::Table(t)),
                Tok::Comma => {}
                other => return Err(self.expected(lua, "comma or array end", other, sat)),
            }
            (tok, at) = self.token();
        }
    }

    fn object(&mut self, lua: &Lua) -> mlua::Result<Value> {
        let t = lua.create_table()?;
        let (mut tok, mut at) = self.token();
        if tok == Tok::ObjEnd {
            return Ok(Value::Table(t));
        }
        loop {
            let Tok::Str(key) = tok else {
                return Err(self.expected(lua, "object key string", tok, at));
            };
            let (colon, cat) = self.token();
            if colon != Tok::Colon {
                return Err(self.expected(lua, "colon", colon, cat));
            }
            let v = self.value(lua)?;
            t.raw_set(lua.create_string(&key)?, v)?;
            let (sep, sat) = self.token();
            match sep {
                Tok::ObjEnd => return Ok(Value::Table(t)),
                Tok::Comma => {}
                other => return Err(self.expected(lua, "comma or object end", other, sat)),
            }
            (tok, at) = self.token();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(lua: &Lua, code: &str) -> String {
        lua.globals().raw_set("cjson", table(lua).unwrap()).unwrap();
        lua.load(code).eval::<String>().unwrap()
    }

    #[test]
    fn encodes_as_lua_cjson() {
        let lua = Lua::new();
        assert_eq!(enc(&lua, "return cjson.encode({1,2,3})"), "[1,2,3]");
        assert_eq!(enc(&lua, "return cjson.encode({})"), "{}");
        assert_eq!(enc(&lua, "return cjson.encode({a=1})"), "{\"a\":1}");
        assert_eq!(enc(&lua, "return cjson.encode('a\"b/c')"), "\"a\\\"b\\/c\"");
        assert_eq!(enc(&lua, "return cjson.encode(1e20)"), "1e+20");
        assert_eq!(enc(&lua, "return cjson.encode({1,nil,3})"), "[1,null,3]");
        assert_eq!(enc(&lua, "return cjson.encode(cjson.null)"), "null");
        let err = lua
            .load("return cjson.encode({[1]=1,[20]=2})")
            .eval::<String>()
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("Cannot serialise table: excessively sparse array"),
            "{err}"
        );
        let err = lua
            .load("local t = {} t[1] = t return cjson.encode(t)")
            .eval::<String>()
            .unwrap_err()
            .to_string();
        assert!(err.contains("excessive nesting (1001)"), "{err}");
    }

    #[test]
    fn decodes_with_lua_cjson_errors() {
        let lua = Lua::new();
        assert_eq!(
            enc(&lua, "local t = cjson.decode('{\"a\":[1,2.5,\"x\",true]}') return tostring(t.a[2]) .. t.a[3]"),
            "2.5x"
        );
        assert_eq!(
            enc(
                &lua,
                "return tostring(cjson.decode('[null]')[1] == cjson.null)"
            ),
            "true"
        );
        assert_eq!(enc(&lua, "return cjson.decode('\"\\\\u00e9\"')"), "é");
        for (input, msg) in [
            (
                "bad",
                "Expected value but found invalid token at character 1",
            ),
            (
                "[1,2",
                "Expected comma or array end but found T_END at character 5",
            ),
            (
                "{1:2}",
                "Expected object key string but found T_NUMBER at character 2",
            ),
            (
                "[1] x",
                "Expected the end but found invalid token at character 5",
            ),
        ] {
            let err = lua
                .load(format!("return cjson.decode('{input}')"))
                .eval::<Value>()
                .unwrap_err()
                .to_string();
            assert!(err.contains(msg), "{input}: {err}");
        }
        let deep = "[".repeat(1100);
        let err = lua
            .load(format!("return cjson.decode('{deep}')"))
            .eval::<Value>()
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("Found too many nested data structures (1001) at character 1001"),
            "{err}"
        );
    }
}
