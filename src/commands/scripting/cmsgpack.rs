//! The `cmsgpack` library of Redis's Lua (lua-cmsgpack 0.4): `pack(...)` concatenates
//! the MessagePack encodings of its arguments, `unpack(data)` returns every object in
//! `data`, `unpack_one(data [, offset])` / `unpack_limit(data, limit [, offset])` return
//! the next offset (-1 at the end) first. Tables whose keys are 1..n are arrays, others
//! maps; nesting deeper than 16 is packed as nil, as lua-cmsgpack does.

use super::lualib::{arg_error, check_bytes, check_number, number, raise_at};
use mlua::{Lua, MultiValue, Table, Value};

const MAX_NESTING: usize = 16;
/// Decoding nests no deeper (lua-cmsgpack recurses on the C stack; here the Rust stack).
const MAX_DECODE_DEPTH: usize = 1000;

pub fn table(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set(
        "pack",
        lua.create_function(|lua, args: MultiValue| {
            if args.is_empty() {
                return Err(arg_error(lua, 0, "pack", "MessagePack pack needs input."));
            }
            let mut out = Vec::new();
            for v in args.iter() {
                encode(v, 0, &mut out)?;
            }
            Ok(Value::String(lua.create_string(&out)?))
        })?,
    )?;
    t.raw_set(
        "unpack",
        lua.create_function(|lua, args: mlua::Variadic<Value>| {
            unpack(lua, &args, "unpack", 0, false)
        })?,
    )?;
    t.raw_set(
        "unpack_one",
        lua.create_function(|lua, args: mlua::Variadic<Value>| {
            unpack(lua, &args, "unpack_one", 1, true)
        })?,
    )?;
    t.raw_set(
        "unpack_limit",
        lua.create_function(|lua, args: mlua::Variadic<Value>| {
            let limit = check_number(lua, &args, 1, "unpack_limit")? as i64;
            let rest: Vec<Value> = args
                .iter()
                .cloned()
                .enumerate()
                .filter(|(i, _)| *i != 1)
                .map(|(_, v)| v)
                .collect();
            unpack(lua, &rest, "unpack_limit", limit.max(0) as usize, true)
        })?,
    )?;
    Ok(t)
}

fn encode(v: &Value, level: usize, out: &mut Vec<u8>) -> mlua::Result<()> {
    match v {
        Value::Nil => out.push(0xc0),
        Value::Boolean(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
        Value::Integer(i) => encode_int(*i, out),
        Value::Number(n) => {
            if n.is_finite() && (*n as i64) as f64 == *n {
                encode_int(*n as i64, out);
            } else if (*n as f32) as f64 == *n || n.is_nan() {
                out.push(0xca);
                out.extend_from_slice(&(*n as f32).to_be_bytes());
            } else {
                out.push(0xcb);
                out.extend_from_slice(&n.to_be_bytes());
            }
        }
        Value::String(s) => {
            let s = s.as_bytes();
            let len = s.len();
            if len < 32 {
                out.push(0xa0 | len as u8);
            } else if len <= 0xff {
                out.push(0xd9);
                out.push(len as u8);
            } else if len <= 0xffff {
                out.push(0xda);
                out.extend_from_slice(&(len as u16).to_be_bytes());
            } else {
                out.push(0xdb);
                out.extend_from_slice(&(len as u32).to_be_bytes());
            }
            out.extend_from_slice(&s);
        }
        Value::Table(t) if level < MAX_NESTING => {
            let mut count = 0usize;
            let mut max = 0i64;
            let mut array = true;
            for pair in t.pairs::<Value, Value>() {
                let (k, _) = pair?;
                count += 1;
                match k {
                    Value::Integer(i) if i >= 1 => max = max.max(i),
                    Value::Number(n) if n >= 1.0 && n.fract() == 0.0 => max = max.max(n as i64),
                    _ => array = false,
                }
            }
            if array && max as usize == count {
                header(out, count, 0x90, 0xdc, 0xdd);
                for i in 1..=count {
                    let e: Value = t.raw_get(i)?;
                    encode(&e, level + 1, out)?;
                }
            } else {
                header(out, count, 0x80, 0xde, 0xdf);
                for pair in t.pairs::<Value, Value>() {
                    let (k, val) = pair?;
                    encode(&k, level + 1, out)?;
                    encode(&val, level + 1, out)?;
                }
            }
        }
        _ => out.push(0xc0),
    }
    Ok(())
}

fn header(out: &mut Vec<u8>, n: usize, fix: u8, b16: u8, b32: u8) {
    if n <= 15 {
        out.push(fix | n as u8);
    } else if n <= 0xffff {
        out.push(b16);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        out.push(b32);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    }
}

fn encode_int(n: i64, out: &mut Vec<u8>) {
    if n >= 0 {
        if n <= 127 {
            out.push(n as u8);
        } else if n <= 0xff {
            out.push(0xcc);
            out.push(n as u8);
        } else if n <= 0xffff {
            out.push(0xcd);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        } else if n <= 0xffff_ffff {
            out.push(0xce);
            out.extend_from_slice(&(n as u32).to_be_bytes());
        } else {
            out.push(0xcf);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    } else if n >= -32 {
        out.push(n as i8 as u8);
    } else if n >= -128 {
        out.push(0xd0);
        out.push(n as i8 as u8);
    } else if n >= -32768 {
        out.push(0xd1);
        out.extend_from_slice(&(n as i16).to_be_bytes());
    } else if n >= -2_147_483_648 {
        out.push(0xd2);
        out.extend_from_slice(&(n as i32).to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// `limit` 0: every object. `with_offset`: the next offset first (-1 when `data` ends).
fn unpack(
    lua: &Lua,
    args: &[Value],
    fname: &str,
    limit: usize,
    with_offset: bool,
) -> mlua::Result<MultiValue> {
    let data = check_bytes(lua, args, 0, fname)?;
    let mut pos = match args.get(1) {
        Some(Value::Nil) | None => 0,
        Some(_) => {
            let o = check_number(lua, args, 1, fname)?;
            if o < 0.0 || o as usize > data.len() {
                return Err(raise_at(lua, "Start offset greater than input length."));
            }
            o as usize
        }
    };
    let mut out = Vec::new();
    while pos < data.len() && (limit == 0 || out.len() < limit) {
        let mut d = Decoder {
            data: &data,
            pos,
            lua,
        };
        let v = d.value(0)?;
        pos = d.pos;
        out.push(v);
    }
    if with_offset {
        let next = if pos >= data.len() { -1 } else { pos as i64 };
        out.insert(0, Value::Integer(next));
    }
    Ok(MultiValue::from_vec(out))
}

struct Decoder<'a> {
    data: &'a [u8],
    pos: usize,
    lua: &'a Lua,
}

impl Decoder<'_> {
    fn missing(&self) -> mlua::Error {
        raise_at(self.lua, "Missing bytes in input.")
    }

    fn take(&mut self, n: usize) -> mlua::Result<&[u8]> {
        if self.data.len() - self.pos < n {
            return Err(self.missing());
        }
        let s = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn uint(&mut self, n: usize) -> mlua::Result<u64> {
        let b = self.take(n)?;
        Ok(b.iter().fold(0u64, |a, &x| (a << 8) | x as u64))
    }

    fn value(&mut self, depth: usize) -> mlua::Result<Value> {
        if depth > MAX_DECODE_DEPTH {
            return Err(raise_at(self.lua, "Bad data format in input."));
        }
        let c = self.take(1)?[0];
        let lua = self.lua;
        Ok(match c {
            0x00..=0x7f => Value::Integer(c as i64),
            0xe0..=0xff => Value::Integer(c as i8 as i64),
            0xc0 => Value::Nil,
            0xc2 => Value::Boolean(false),
            0xc3 => Value::Boolean(true),
            0xca => {
                let b: [u8; 4] = self.take(4)?.try_into().unwrap_or_default();
                number(f32::from_be_bytes(b) as f64)
            }
            0xcb => {
                let b: [u8; 8] = self.take(8)?.try_into().unwrap_or_default();
                number(f64::from_be_bytes(b))
            }
            0xcc => Value::Integer(self.uint(1)? as i64),
            0xcd => Value::Integer(self.uint(2)? as i64),
            0xce => Value::Integer(self.uint(4)? as i64),
            0xcf => {
                let v = self.uint(8)?;
                if v > i64::MAX as u64 {
                    Value::Number(v as f64)
                } else {
                    Value::Integer(v as i64)
                }
            }
            0xd0 => Value::Integer(self.uint(1)? as u8 as i8 as i64),
            0xd1 => Value::Integer(self.uint(2)? as u16 as i16 as i64),
            0xd2 => Value::Integer(self.uint(4)? as u32 as i32 as i64),
            0xd3 => Value::Integer(self.uint(8)? as i64),
            0xa0..=0xbf => self.string((c & 0x1f) as usize)?,
            0xd9 | 0xc4 => {
                let n = self.uint(1)? as usize;
                self.string(n)?
            }
            0xda | 0xc5 => {
                let n = self.uint(2)? as usize;
                self.string(n)?
            }
            0xdb | 0xc6 => {
                let n = self.uint(4)? as usize;
                self.string(n)?
            }
            0x90..=0x9f => self.array((c & 0x0f) as usize, depth)?,
            0xdc => {
                let n = self.uint(2)? as usize;
                self.array(n, depth)?
            }
            0xdd => {
                let n = self.uint(4)? as usize;
                self.array(n, depth)?
            }
            0x80..=0x8f => self.map((c & 0x0f) as usize, depth)?,
            0xde => {
                let n = self.uint(2)? as usize;
                self.map(n, depth)?
            }
            0xdf => {
                let n = self.uint(4)? as usize;
                self.map(n, depth)?
            }
            _ => {
                let _ = lua;
                return Err(raise_at(self.lua, "Bad data format in input."));
            }
        })
    }

    fn string(&mut self, n: usize) -> mlua::Result<Value> {
        let lua = self.lua;
        let s = self.take(n)?;
        Ok(Value::String(lua.create_string(s)?))
    }

    fn array(&mut self, n: usize, depth: usize) -> mlua::Result<Value> {
        // Every element takes at least a byte: a count beyond the input is missing bytes
        // (and never a huge allocation).
        if n > self.data.len() - self.pos {
            return Err(self.missing());
        }
        let t = self.lua.create_table_with_capacity(n, 0)?;
        for i in 1..=n {
            let v = self.value(depth + 1)?;
            t.raw_set(i, v)?;
        }
        Ok(Value::Table(t))
    }

    fn map(&mut self, n: usize, depth: usize) -> mlua::Result<Value> {
        if n.saturating_mul(2) > self.data.len() - self.pos {
            return Err(self.missing());
        }
        let t = self.lua.create_table_with_capacity(0, n)?;
        for _ in 0..n {
            let k = self.value(depth + 1)?;
            let v = self.value(depth + 1)?;
            // A nil key cannot be stored (lua-cmsgpack's lua_settable would fail too).
            if !matches!(k, Value::Nil) {
                t.raw_set(k, v)?;
            }
        }
        Ok(Value::Table(t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lua() -> Lua {
        let lua = Lua::new();
        lua.globals()
            .raw_set("cmsgpack", table(&lua).unwrap())
            .unwrap();
        lua
    }

    #[test]
    fn packs_as_lua_cmsgpack() {
        let lua = lua();
        let b = |code: &str| {
            lua.load(code)
                .eval::<mlua::LuaString>()
                .unwrap()
                .as_bytes()
                .to_vec()
        };
        assert_eq!(b("return cmsgpack.pack({1,2,3})"), [0x93, 1, 2, 3]);
        assert_eq!(b("return cmsgpack.pack({a=1})"), [0x81, 0xa1, b'a', 1]);
        assert_eq!(b("return cmsgpack.pack(1.5)"), [0xca, 0x3f, 0xc0, 0, 0]);
        assert_eq!(
            b("return cmsgpack.pack(-1, 300, 70000, 'abc', true, nil)"),
            [0xff, 0xcd, 1, 44, 0xce, 0, 1, 0x11, 0x70, 0xa3, b'a', b'b', b'c', 0xc3, 0xc0]
        );
        let nested = b("local t = {} t[1] = t return cmsgpack.pack(t)");
        assert_eq!(nested.len(), 17);
        assert_eq!(nested[16], 0xc0);
        assert_eq!(
            b("return cmsgpack.pack(string.rep('a', 70000))").len(),
            70005
        );
    }

    #[test]
    fn unpacks_and_refuses_truncated_input() {
        let lua = lua();
        let s: String = lua
            .load("local a, b, c = cmsgpack.unpack(cmsgpack.pack(1, 'x', {2, 3})) return a .. b .. c[2]")
            .eval()
            .unwrap();
        assert_eq!(s, "1x3");
        let err = lua
            .load("return cmsgpack.unpack('\\145')")
            .eval::<Value>()
            .unwrap_err();
        assert!(err.to_string().contains("Missing bytes in input."), "{err}");
        let err = lua
            .load("return cmsgpack.unpack('\\221\\255\\255\\255\\255')")
            .eval::<Value>()
            .unwrap_err();
        assert!(err.to_string().contains("Missing bytes in input."), "{err}");
        let err = lua
            .load("return cmsgpack.unpack('\\193')")
            .eval::<Value>()
            .unwrap_err();
        assert!(
            err.to_string().contains("Bad data format in input."),
            "{err}"
        );
        let deep = "\\145".repeat(5000);
        assert!(lua
            .load(format!("return cmsgpack.unpack('{deep}')"))
            .eval::<Value>()
            .is_err());
    }
}
