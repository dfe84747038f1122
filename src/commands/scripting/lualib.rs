//! What the script libraries share: Lua-style errors raised from Rust (positions as
//! `luaL_error` writes them, argument errors as `luaL_argerror`), argument checks with
//! Lua 5.1's coercions, C's `%.14g`; and the `bit` (LuaBitOp) and `struct` libraries
//! Redis 7 loads into its Lua state.

use mlua::{Lua, MultiValue, Table, Value};

/// An error that reaches the script as Redis's error tables do (`{err = text}`): raised by
/// `redis.call` and friends, turned into an error reply with `text` as is.
#[derive(Debug, Clone)]
pub struct ReplyError(pub String);

impl std::fmt::Display for ReplyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ReplyError {}

/// Raises `{err = text}` (Redis's luaPushError + lua_error).
pub fn raise_reply(text: impl Into<String>) -> mlua::Error {
    mlua::Error::external(ReplyError(text.into()))
}

/// `luaL_where(L, 1)`: `source:line: ` of the Lua code that called the running C
/// function, or nothing when a C function called it.
pub fn position(lua: &Lua) -> String {
    lua.inspect_stack(1, |d| {
        let line = d.current_line();
        let src = d.source().short_src.map(|s| s.into_owned());
        match (src, line) {
            (Some(s), Some(l)) if l > 0 => format!("{s}:{l}: "),
            _ => String::new(),
        }
    })
    .unwrap_or_default()
}

/// `luaL_error`: the message with the caller's position.
pub fn raise_at(lua: &Lua, msg: &str) -> mlua::Error {
    mlua::Error::RuntimeError(format!("{}{msg}", position(lua)))
}

/// `luaL_argerror`.
pub fn arg_error(lua: &Lua, n: usize, fname: &str, extra: &str) -> mlua::Error {
    raise_at(lua, &format!("bad argument #{n} to '{fname}' ({extra})"))
}

/// Lua's name of a value's type (`luaL_typename`), "no value" past the arguments.
pub fn type_name(v: Option<&Value>) -> &'static str {
    match v {
        None => "no value",
        Some(Value::Nil) => "nil",
        Some(Value::Boolean(_)) => "boolean",
        Some(Value::LightUserData(_)) | Some(Value::UserData(_)) => "userdata",
        Some(Value::Integer(_)) | Some(Value::Number(_)) => "number",
        Some(Value::String(_)) => "string",
        Some(Value::Table(_)) => "table",
        Some(Value::Function(_)) => "function",
        Some(Value::Thread(_)) => "thread",
        Some(_) => "userdata",
    }
}

/// Lua 5.1's string → number coercion (`lua_str2number`: decimal or hex, surrounding
/// spaces allowed).
pub fn str_to_number(s: &[u8]) -> Option<f64> {
    let t = std::str::from_utf8(s)
        .ok()?
        .trim_matches(|c: char| c.is_ascii_whitespace());
    if t.is_empty() {
        return None;
    }
    let (neg, body) = match t.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    if let Some(hex) = body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        let v = u64::from_str_radix(hex, 16).ok()? as f64;
        return Some(if neg { -v } else { v });
    }
    // Rust accepts "inf"/"nan" spellings strtod also accepts; reject words Lua would not
    // see as numbers ("infinity" is accepted by both).
    if !body.starts_with(|c: char| {
        c.is_ascii_digit() || c == '.' || c == 'i' || c == 'I' || c == 'n' || c == 'N'
    }) {
        return None;
    }
    t.parse::<f64>().ok()
}

/// The number a value is as an argument (`lua_tonumber`), if any.
pub fn to_number(v: &Value) -> Option<f64> {
    match v {
        Value::Integer(i) => Some(*i as f64),
        Value::Number(n) => Some(*n),
        Value::String(s) => str_to_number(&s.as_bytes()),
        _ => None,
    }
}

/// `luaL_checknumber` of argument `i` (0-based; messages count from 1).
pub fn check_number(lua: &Lua, args: &[Value], i: usize, fname: &str) -> mlua::Result<f64> {
    match args.get(i).and_then(to_number) {
        Some(n) => Ok(n),
        None => Err(arg_error(
            lua,
            i + 1,
            fname,
            &format!("number expected, got {}", type_name(args.get(i))),
        )),
    }
}

/// `luaL_checklstring` of argument `i`: strings, and numbers formatted as Lua does.
pub fn check_bytes(lua: &Lua, args: &[Value], i: usize, fname: &str) -> mlua::Result<Vec<u8>> {
    match args.get(i) {
        Some(Value::String(s)) => Ok(s.as_bytes().to_vec()),
        Some(Value::Integer(n)) => Ok(n.to_string().into_bytes()),
        Some(Value::Number(n)) => Ok(fmt_g(*n, 14).into_bytes()),
        other => Err(arg_error(
            lua,
            i + 1,
            fname,
            &format!("string expected, got {}", type_name(other)),
        )),
    }
}

/// C's `%.<prec>g` (Lua prints numbers with `%.14g`).
pub fn fmt_g(v: f64, prec: usize) -> String {
    if v.is_nan() {
        return if v.is_sign_negative() { "-nan" } else { "nan" }.into();
    }
    if v.is_infinite() {
        return if v < 0.0 { "-inf" } else { "inf" }.into();
    }
    if v == 0.0 {
        return if v.is_sign_negative() { "-0" } else { "0" }.into();
    }
    let p = prec.max(1);
    let sci = format!("{:.*e}", p - 1, v);
    let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let x: i32 = exp.parse().unwrap_or(0);
    if x < -4 || x >= p as i32 {
        let mant = strip_zeros(mant);
        let sign = if x < 0 { '-' } else { '+' };
        format!("{mant}e{sign}{:02}", x.abs())
    } else {
        let decimals = (p as i32 - 1 - x).max(0) as usize;
        strip_zeros(&format!("{v:.decimals$}")).to_string()
    }
}

fn strip_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// A Lua number as a value: integral ones as integers (so they print without a
/// fraction, as Lua 5.1 prints them).
pub fn number(v: f64) -> Value {
    if v.fract() == 0.0 && v.abs() < 9.0e15 {
        Value::Integer(v as i64)
    } else {
        Value::Number(v)
    }
}

// ---------------------------------------------------------------- bit (LuaBitOp 1.0.2)

/// LuaBitOp's normalisation: the number rounded to an integer, modulo 2^32, as a signed
/// 32-bit value.
pub fn tobit(v: f64) -> i32 {
    if !v.is_finite() {
        return 0;
    }
    let r = v.round_ties_even();
    r.rem_euclid(4_294_967_296.0) as u64 as u32 as i32
}

fn bit_arg(lua: &Lua, args: &[Value], i: usize, fname: &str) -> mlua::Result<i32> {
    Ok(tobit(check_number(lua, args, i, fname)?))
}

type BitFn = fn(&Lua, &[Value]) -> mlua::Result<Value>;

fn bit_fold(
    lua: &Lua,
    args: &[Value],
    fname: &str,
    op: fn(i32, i32) -> i32,
) -> mlua::Result<Value> {
    let mut acc = bit_arg(lua, args, 0, fname)?;
    for i in 1..args.len() {
        acc = op(acc, bit_arg(lua, args, i, fname)?);
    }
    Ok(Value::Integer(acc as i64))
}

fn bit_shift(
    lua: &Lua,
    args: &[Value],
    fname: &str,
    op: fn(i32, u32) -> i32,
) -> mlua::Result<Value> {
    let b = bit_arg(lua, args, 0, fname)?;
    let n = bit_arg(lua, args, 1, fname)? as u32 & 31;
    Ok(Value::Integer(op(b, n) as i64))
}

const BIT_FUNCS: &[(&str, BitFn)] = &[
    ("tobit", |l, a| {
        Ok(Value::Integer(bit_arg(l, a, 0, "tobit")? as i64))
    }),
    ("bnot", |l, a| {
        Ok(Value::Integer(!bit_arg(l, a, 0, "bnot")? as i64))
    }),
    ("band", |l, a| bit_fold(l, a, "band", |x, y| x & y)),
    ("bor", |l, a| bit_fold(l, a, "bor", |x, y| x | y)),
    ("bxor", |l, a| bit_fold(l, a, "bxor", |x, y| x ^ y)),
    ("lshift", |l, a| {
        bit_shift(l, a, "lshift", |b, n| ((b as u32) << n) as i32)
    }),
    ("rshift", |l, a| {
        bit_shift(l, a, "rshift", |b, n| ((b as u32) >> n) as i32)
    }),
    ("arshift", |l, a| bit_shift(l, a, "arshift", |b, n| b >> n)),
    ("rol", |l, a| {
        bit_shift(l, a, "rol", |b, n| (b as u32).rotate_left(n) as i32)
    }),
    ("ror", |l, a| {
        bit_shift(l, a, "ror", |b, n| (b as u32).rotate_right(n) as i32)
    }),
    ("bswap", |l, a| {
        Ok(Value::Integer(
            (bit_arg(l, a, 0, "bswap")? as u32).swap_bytes() as i32 as i64,
        ))
    }),
    ("tohex", tohex),
];

fn tohex(lua: &Lua, args: &[Value]) -> mlua::Result<Value> {
    let b = bit_arg(lua, args, 0, "tohex")? as u32;
    let mut n = match args.get(1) {
        None | Some(Value::Nil) => 8,
        Some(_) => bit_arg(lua, args, 1, "tohex")?,
    };
    let upper = n < 0;
    if upper {
        n = n.wrapping_neg();
    }
    let n = n.clamp(0, 8) as u32;
    let digits: &[u8] = if upper {
        b"0123456789ABCDEF"
    } else {
        b"0123456789abcdef"
    };
    let s: String = (0..n)
        .rev()
        .map(|i| digits[((b >> (4 * i)) & 15) as usize] as char)
        .collect();
    Ok(Value::String(lua.create_string(s)?))
}

pub fn bit_table(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    for &(name, f) in BIT_FUNCS {
        let func = lua.create_function(move |lua, args: mlua::Variadic<Value>| f(lua, &args))?;
        t.raw_set(name, func)?;
    }
    Ok(t)
}

// ---------------------------------------------------------------- struct (Roberto Ierusalimschy's struct.c)

const MAXINTSIZE: usize = 32;
const MAXALIGN: usize = 8;

struct Header {
    little: bool,
    align: usize,
}

/// Reads a number after an option (`i4`, `c10`, `!8`); `default` when none.
fn getnum(lua: &Lua, fmt: &[u8], pos: &mut usize, default: usize) -> mlua::Result<usize> {
    if !fmt.get(*pos).is_some_and(|c| c.is_ascii_digit()) {
        return Ok(default);
    }
    let mut a: usize = 0;
    while let Some(&c) = fmt.get(*pos).filter(|c| c.is_ascii_digit()) {
        if a > (i32::MAX as usize / 10) || a * 10 > (i32::MAX as usize - (c - b'0') as usize) {
            return Err(raise_at(lua, "integral size overflow"));
        }
        a = a * 10 + (c - b'0') as usize;
        *pos += 1;
    }
    Ok(a)
}

fn optsize(lua: &Lua, opt: u8, fmt: &[u8], pos: &mut usize) -> mlua::Result<usize> {
    Ok(match opt {
        b'B' | b'b' | b'x' => 1,
        b'H' | b'h' => 2,
        b'L' | b'l' | b'T' | b'd' => 8,
        b'f' => 4,
        b'c' => getnum(lua, fmt, pos, 1)?,
        b'i' | b'I' => {
            let sz = getnum(lua, fmt, pos, 4)?;
            if sz > MAXINTSIZE {
                return Err(raise_at(
                    lua,
                    &format!("integral size {sz} is larger than limit of {MAXINTSIZE}"),
                ));
            }
            sz
        }
        _ => 0,
    })
}

fn gettoalign(len: usize, h: &Header, opt: u8, size: usize) -> usize {
    if size <= 1 || opt == b'c' || h.align <= 1 {
        return 0;
    }
    let align = size.min(h.align);
    (align - (len & (align - 1))) & (align - 1)
}

/// The options that change no data: spaces, endianness, alignment; anything else is
/// an invalid option.
fn control(
    lua: &Lua,
    opt: u8,
    fmt: &[u8],
    pos: &mut usize,
    h: &mut Header,
    fname: &str,
) -> mlua::Result<()> {
    match opt {
        b' ' => Ok(()),
        b'>' => {
            h.little = false;
            Ok(())
        }
        b'<' => {
            h.little = true;
            Ok(())
        }
        b'!' => {
            let a = getnum(lua, fmt, pos, MAXALIGN)?;
            if !a.is_power_of_two() {
                return Err(raise_at(lua, &format!("alignment {a} is not a power of 2")));
            }
            h.align = a;
            Ok(())
        }
        _ => Err(arg_error(
            lua,
            1,
            fname,
            &format!("invalid format option '{}'", opt as char),
        )),
    }
}

fn struct_pack(lua: &Lua, args: &[Value]) -> mlua::Result<Value> {
    let fmt = check_bytes(lua, args, 0, "pack")?;
    let mut h = Header {
        little: true,
        align: 1,
    };
    let mut out: Vec<u8> = Vec::new();
    let mut arg = 1;
    let mut pos = 0;
    while pos < fmt.len() {
        let opt = fmt[pos];
        pos += 1;
        let mut size = optsize(lua, opt, &fmt, &mut pos)?;
        let pad = gettoalign(out.len(), &h, opt, size);
        out.resize(out.len() + pad, 0);
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let v = check_number(lua, args, arg, "pack")?;
                arg += 1;
                let bits: u64 = if v < 0.0 { (v as i64) as u64 } else { v as u64 };
                let mut bytes: Vec<u8> = (0..size)
                    .map(|i| if i < 8 { (bits >> (8 * i)) as u8 } else { 0 })
                    .collect();
                if !h.little {
                    bytes.reverse();
                }
                out.extend_from_slice(&bytes);
            }
            b'x' => out.push(0),
            b'f' => {
                let v = check_number(lua, args, arg, "pack")? as f32;
                arg += 1;
                out.extend_from_slice(&if h.little {
                    v.to_le_bytes()
                } else {
                    v.to_be_bytes()
                });
            }
            b'd' => {
                let v = check_number(lua, args, arg, "pack")?;
                arg += 1;
                out.extend_from_slice(&if h.little {
                    v.to_le_bytes()
                } else {
                    v.to_be_bytes()
                });
            }
            b'c' | b's' => {
                let s = check_bytes(lua, args, arg, "pack")?;
                arg += 1;
                if size == 0 || opt == b's' {
                    size = s.len();
                }
                if s.len() < size {
                    return Err(arg_error(lua, arg, "pack", "string too short"));
                }
                out.extend_from_slice(&s[..size]);
                if opt == b's' {
                    out.push(0);
                }
            }
            _ => control(lua, opt, &fmt, &mut pos, &mut h, "pack")?,
        }
    }
    Ok(Value::String(lua.create_string(&out)?))
}

fn struct_unpack(lua: &Lua, args: &[Value]) -> mlua::Result<MultiValue> {
    let fmt = check_bytes(lua, args, 0, "unpack")?;
    let data = check_bytes(lua, args, 1, "unpack")?;
    let start = match args.get(2) {
        None | Some(Value::Nil) => 1.0,
        Some(_) => check_number(lua, args, 2, "unpack")?,
    };
    let ld = data.len();
    let pos = (start as i64 - 1).max(-1);
    if pos < 0 || pos as usize > ld {
        return Err(arg_error(lua, 3, "unpack", "offset must be 1 or greater"));
    }
    let mut pos = pos as usize;
    let mut h = Header {
        little: true,
        align: 1,
    };
    let mut out: Vec<Value> = Vec::new();
    let mut fpos = 0;
    while fpos < fmt.len() {
        let opt = fmt[fpos];
        fpos += 1;
        let mut size = optsize(lua, opt, &fmt, &mut fpos)?;
        pos += gettoalign(pos, &h, opt, size);
        if size > ld.saturating_sub(pos) || pos > ld {
            return Err(arg_error(lua, 2, "unpack", "data string too short"));
        }
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let mut bytes = data[pos..pos + size].to_vec();
                if !h.little {
                    bytes.reverse();
                }
                let mut v: u64 = 0;
                for (i, &b) in bytes.iter().enumerate().take(8) {
                    v |= (b as u64) << (8 * i);
                }
                let signed = opt.is_ascii_lowercase();
                let n = if signed && size > 0 && size < 8 {
                    let shift = 64 - 8 * size as u32;
                    (((v << shift) as i64) >> shift) as f64
                } else if signed {
                    v as i64 as f64
                } else {
                    v as f64
                };
                out.push(number(n));
            }
            b'x' => {}
            b'f' => {
                let b: [u8; 4] = data[pos..pos + 4].try_into().unwrap_or_default();
                let v = if h.little {
                    f32::from_le_bytes(b)
                } else {
                    f32::from_be_bytes(b)
                };
                out.push(number(v as f64));
            }
            b'd' => {
                let b: [u8; 8] = data[pos..pos + 8].try_into().unwrap_or_default();
                let v = if h.little {
                    f64::from_le_bytes(b)
                } else {
                    f64::from_be_bytes(b)
                };
                out.push(number(v));
            }
            b'c' => {
                if size == 0 {
                    let prev = out.last().and_then(to_number);
                    let Some(n) = prev else {
                        return Err(raise_at(lua, "format 'c0' needs a previous size"));
                    };
                    out.pop();
                    size = n.max(0.0) as usize;
                    if size > ld - pos {
                        return Err(arg_error(lua, 2, "unpack", "data string too short"));
                    }
                }
                out.push(Value::String(lua.create_string(&data[pos..pos + size])?));
            }
            b's' => {
                let Some(end) = data[pos..].iter().position(|&b| b == 0) else {
                    return Err(raise_at(lua, "unfinished string in data"));
                };
                out.push(Value::String(lua.create_string(&data[pos..pos + end])?));
                size = end + 1;
            }
            _ => control(lua, opt, &fmt, &mut fpos, &mut h, "unpack")?,
        }
        pos += size;
    }
    out.push(Value::Integer(pos as i64 + 1));
    Ok(MultiValue::from_vec(out))
}

fn struct_size(lua: &Lua, args: &[Value]) -> mlua::Result<Value> {
    let fmt = check_bytes(lua, args, 0, "size")?;
    let mut h = Header {
        little: true,
        align: 1,
    };
    let mut total = 0usize;
    let mut pos = 0;
    while pos < fmt.len() {
        let opt = fmt[pos];
        pos += 1;
        let size = optsize(lua, opt, &fmt, &mut pos)?;
        total += gettoalign(total, &h, opt, size);
        if opt == b's' {
            return Err(arg_error(lua, 1, "size", "option 's' has no fixed size"));
        }
        if opt == b'c' && size == 0 {
            return Err(arg_error(lua, 1, "size", "option 'c0' has no fixed size"));
        }
        if !matches!(
            opt,
            b'b' | b'B'
                | b'h'
                | b'H'
                | b'l'
                | b'L'
                | b'T'
                | b'i'
                | b'I'
                | b'x'
                | b'f'
                | b'd'
                | b'c'
        ) {
            control(lua, opt, &fmt, &mut pos, &mut h, "size")?;
        }
        total += size;
    }
    Ok(Value::Integer(total as i64))
}

pub fn struct_table(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set(
        "pack",
        lua.create_function(|lua, args: mlua::Variadic<Value>| struct_pack(lua, &args))?,
    )?;
    t.raw_set(
        "unpack",
        lua.create_function(|lua, args: mlua::Variadic<Value>| struct_unpack(lua, &args))?,
    )?;
    t.raw_set(
        "size",
        lua.create_function(|lua, args: mlua::Variadic<Value>| struct_size(lua, &args))?,
    )?;
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fmt_g_matches_c() {
        assert_eq!(fmt_g(0.1, 14), "0.1");
        assert_eq!(fmt_g(1e20, 14), "1e+20");
        assert_eq!(fmt_g(1.5, 14), "1.5");
        assert_eq!(fmt_g(100.0, 14), "100");
        assert_eq!(fmt_g(0.0001, 14), "0.0001");
        assert_eq!(fmt_g(0.00001, 14), "1e-05");
        assert_eq!(fmt_g(123456789012345.0, 14), "1.2345678901234e+14");
        assert_eq!(fmt_g(-2.5, 14), "-2.5");
        assert_eq!(fmt_g(0.35333609737146, 14), "0.35333609737146");
    }

    #[test]
    fn tobit_wraps_as_luabitop() {
        assert_eq!(tobit(4294967296.0 + 5.0), 5);
        assert_eq!(tobit(-1.0), -1);
        assert_eq!(tobit(2147483648.0), i32::MIN);
        assert_eq!(tobit(2.5), 2);
        assert_eq!(tobit(3.5), 4);
    }

    #[test]
    fn string_coercion() {
        assert_eq!(str_to_number(b" 10 "), Some(10.0));
        assert_eq!(str_to_number(b"0x10"), Some(16.0));
        assert_eq!(str_to_number(b"1e2"), Some(100.0));
        assert_eq!(str_to_number(b"abc"), None);
        assert_eq!(str_to_number(b""), None);
    }
}
