//! Redis's RDB value serialization: the bytes DUMP produces and RESTORE accepts, and the
//! per-key value records of an RDB file.
//!
//! A value is a type byte followed by the type's encoding. The building blocks:
//!
//! * **Lengths** (`rdbSaveLen` in Redis): the top two bits of the first byte select the
//!   form — `00` a 6-bit length, `01` a 14-bit big-endian length over two bytes, `10` with
//!   the byte exactly `0x80` a 32-bit big-endian length and `0x81` a 64-bit one, and `11` a
//!   *special encoding* whose low six bits say how the following string is stored.
//! * **Strings**: a length then the bytes, or a special encoding: `0xC0`/`0xC1`/`0xC2` an
//!   integer in 1/2/4 little-endian bytes (the string is its decimal form) and `0xC3` an
//!   LZF-compressed string (compressed length, original length, compressed bytes).
//!
//! Decoding never trusts a length: every read is bounds-checked against the input, every
//! allocation is bounded by the input size or by [`Reader::max_string_len`], and corrupt
//! input yields an [`RdbError`], never a panic.
//!
//! Strings, lists, hashes, sets, sorted sets and streams (consumer groups included) are
//! implemented. The other types (modules, zipmaps) are
//! recognised and answered with [`RdbError::UnsupportedType`].
//!
//! DUMP payloads ([`dump_payload`], [`verify_dump_payload`]) are one encoded value followed
//! by the 2-byte RDB version and a CRC-64 (Jones polynomial, as Redis's `crc64.c`) of
//! everything before it, both little endian.

use std::borrow::Cow;

/// The RDB format version Redis 7.0 writes (and the newest it reads).
pub const RDB_VERSION: u16 = 10;

// Value type bytes (Redis's RDB_TYPE_*).
pub const TYPE_STRING: u8 = 0;
pub const TYPE_LIST: u8 = 1;
pub const TYPE_SET: u8 = 2;
pub const TYPE_ZSET: u8 = 3;
pub const TYPE_HASH: u8 = 4;
pub const TYPE_ZSET_2: u8 = 5;
pub const TYPE_MODULE_PRE_GA: u8 = 6;
pub const TYPE_MODULE_2: u8 = 7;
pub const TYPE_HASH_ZIPMAP: u8 = 9;
pub const TYPE_LIST_ZIPLIST: u8 = 10;
pub const TYPE_SET_INTSET: u8 = 11;
pub const TYPE_ZSET_ZIPLIST: u8 = 12;
pub const TYPE_HASH_ZIPLIST: u8 = 13;
pub const TYPE_LIST_QUICKLIST: u8 = 14;
pub const TYPE_STREAM_LISTPACKS: u8 = 15;
pub const TYPE_HASH_LISTPACK: u8 = 16;
pub const TYPE_ZSET_LISTPACK: u8 = 17;
pub const TYPE_LIST_QUICKLIST_2: u8 = 18;
pub const TYPE_STREAM_LISTPACKS_2: u8 = 19;
/// Redis 7.2's listpack-encoded set (RDB version 11; Redis 7.0 cannot read it).
pub const TYPE_SET_LISTPACK: u8 = 20;
/// Redis 7.2's stream with consumers' active time (read; 7.0 cannot read it, so streams
/// are written as type 19, which is what 7.0.15 writes).
pub const TYPE_STREAM_LISTPACKS_3: u8 = 21;

/// True for the type bytes Redis 7.0 accepts as value types (`rdbIsObjectType`).
pub fn is_object_type(t: u8) -> bool {
    matches!(t, 0..=7 | 9..=21)
}

// Special string encodings (the low bits of an `11xxxxxx` length byte).
const ENC_INT8: u8 = 0;
const ENC_INT16: u8 = 1;
const ENC_INT32: u8 = 2;
const ENC_LZF: u8 = 3;

const LEN_6BIT: u8 = 0;
const LEN_14BIT: u8 = 1;
const LEN_ENCVAL: u8 = 3;
const LEN_32BIT: u8 = 0x80;
const LEN_64BIT: u8 = 0x81;

/// Why a value could not be decoded. RESTORE answers all of them with
/// "ERR Bad data format"; the RDB loader reports the detail.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RdbError {
    #[error("unexpected end of data")]
    Truncated,
    #[error("unknown length encoding {0:#04x}")]
    BadLengthEncoding(u8),
    #[error("unknown string encoding {0}")]
    BadStringEncoding(u8),
    #[error("length {0} exceeds the data or the allowed maximum")]
    BadLength(u64),
    #[error("invalid LZF compressed string")]
    Lzf,
    #[error("unknown value type {0}")]
    UnknownType(u8),
    #[error("value type {0} is not supported yet")]
    UnsupportedType(u8),
    #[error("corrupt collection encoding")]
    Corrupt,
}

/// A length as read from the stream: a plain length or a special string encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Len {
    Plain(u64),
    Encoded(u8),
}

/// A bounds-checked cursor over RDB bytes.
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    /// Largest string a read may produce (decompressed LZF strings included), so that a
    /// small corrupt or hostile input can never ask for a huge allocation.
    pub max_string_len: u64,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader {
            buf,
            pos: 0,
            max_string_len: u32::MAX as u64,
        }
    }

    pub fn with_max_string_len(mut self, max: u64) -> Reader<'a> {
        self.max_string_len = max;
        self
    }

    pub fn pos(&self) -> usize {
        self.pos
    }

    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    pub fn read_u8(&mut self) -> Result<u8, RdbError> {
        let b = *self.buf.get(self.pos).ok_or(RdbError::Truncated)?;
        self.pos += 1;
        Ok(b)
    }

    /// The next `n` bytes, borrowed from the input.
    pub fn read_bytes(&mut self, n: usize) -> Result<&'a [u8], RdbError> {
        if n > self.remaining() {
            return Err(RdbError::Truncated);
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn read_array<const N: usize>(&mut self) -> Result<[u8; N], RdbError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.read_bytes(N)?);
        Ok(a)
    }

    /// A length or special-encoding marker (Redis's `rdbLoadLenByRef`).
    pub fn read_len(&mut self) -> Result<Len, RdbError> {
        let b = self.read_u8()?;
        match b >> 6 {
            LEN_ENCVAL => Ok(Len::Encoded(b & 0x3F)),
            LEN_6BIT => Ok(Len::Plain((b & 0x3F) as u64)),
            LEN_14BIT => {
                let lo = self.read_u8()?;
                Ok(Len::Plain((((b & 0x3F) as u64) << 8) | lo as u64))
            }
            _ => match b {
                LEN_32BIT => Ok(Len::Plain(u32::from_be_bytes(self.read_array()?) as u64)),
                LEN_64BIT => Ok(Len::Plain(u64::from_be_bytes(self.read_array()?))),
                _ => Err(RdbError::BadLengthEncoding(b)),
            },
        }
    }

    /// A length where a special encoding is not allowed (element counts and the like).
    pub fn read_plain_len(&mut self) -> Result<u64, RdbError> {
        match self.read_len()? {
            Len::Plain(n) => Ok(n),
            Len::Encoded(e) => Err(RdbError::BadStringEncoding(e)),
        }
    }

    /// A string in any of its encodings (Redis's `rdbGenericLoadStringObject`). Plain
    /// strings are borrowed from the input; integer and LZF forms are materialised.
    pub fn read_string(&mut self) -> Result<Cow<'a, [u8]>, RdbError> {
        match self.read_len()? {
            Len::Plain(n) => {
                if n > self.max_string_len || n > self.remaining() as u64 {
                    return Err(RdbError::BadLength(n));
                }
                Ok(Cow::Borrowed(self.read_bytes(n as usize)?))
            }
            Len::Encoded(ENC_INT8) => {
                let v = self.read_u8()? as i8 as i64;
                Ok(Cow::Owned(v.to_string().into_bytes()))
            }
            Len::Encoded(ENC_INT16) => {
                let v = i16::from_le_bytes(self.read_array()?) as i64;
                Ok(Cow::Owned(v.to_string().into_bytes()))
            }
            Len::Encoded(ENC_INT32) => {
                let v = i32::from_le_bytes(self.read_array()?) as i64;
                Ok(Cow::Owned(v.to_string().into_bytes()))
            }
            Len::Encoded(ENC_LZF) => {
                let clen = self.read_plain_len()?;
                let len = self.read_plain_len()?;
                if clen > self.remaining() as u64 {
                    return Err(RdbError::BadLength(clen));
                }
                if len > self.max_string_len {
                    return Err(RdbError::BadLength(len));
                }
                let compressed = self.read_bytes(clen as usize)?;
                Ok(Cow::Owned(lzf_decompress(compressed, len as usize)?))
            }
            Len::Encoded(e) => Err(RdbError::BadStringEncoding(e)),
        }
    }
}

/// LZF's largest expansion: a 3-byte back reference yields 264 bytes.
const LZF_MAX_EXPANSION: usize = 88;

/// Decompresses an LZF block (the format of liblzf, which Redis uses) that must expand to
/// exactly `out_len` bytes. Corrupt input — a back reference before the start, a run past
/// the end of the input or of `out_len`, a short result — is an error, never a panic.
///
/// The stream is a sequence of items, each led by a control byte `c`:
/// * `c < 32`: a literal run of `c + 1` bytes follows;
/// * otherwise a back reference: length `c >> 5` (7 means "add the next byte"), plus 2,
///   copied from `((c & 0x1f) << 8) + next byte + 1` bytes back in the output (the source
///   may overlap the bytes being written, which repeats a pattern).
pub fn lzf_decompress(input: &[u8], out_len: usize) -> Result<Vec<u8>, RdbError> {
    if out_len > input.len().saturating_mul(LZF_MAX_EXPANSION) {
        return Err(RdbError::Lzf);
    }
    let mut out: Vec<u8> = Vec::new();
    out.try_reserve_exact(out_len)
        .map_err(|_| RdbError::BadLength(out_len as u64))?;
    let mut i = 0;
    while i < input.len() {
        let ctrl = input[i] as usize;
        i += 1;
        if ctrl < 32 {
            let n = ctrl + 1;
            let lit = input.get(i..i + n).ok_or(RdbError::Lzf)?;
            if out.len() + n > out_len {
                return Err(RdbError::Lzf);
            }
            out.extend_from_slice(lit);
            i += n;
        } else {
            let mut len = ctrl >> 5;
            if len == 7 {
                len += *input.get(i).ok_or(RdbError::Lzf)? as usize;
                i += 1;
            }
            let lo = *input.get(i).ok_or(RdbError::Lzf)? as usize;
            i += 1;
            let back = ((ctrl & 0x1f) << 8) + lo + 1;
            let n = len + 2;
            if back > out.len() || out.len() + n > out_len {
                return Err(RdbError::Lzf);
            }
            let start = out.len() - back;
            if back >= n {
                out.extend_from_within(start..start + n);
            } else {
                // Overlapping copy: byte by byte so freshly written bytes are re-read.
                for k in 0..n {
                    let b = out[start + k];
                    out.push(b);
                }
            }
        }
    }
    if out.len() != out_len {
        return Err(RdbError::Lzf);
    }
    Ok(out)
}

/// A value decoded from its RDB form, independent of how the keyspace stores it.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    String(Vec<u8>),
    /// A list as validated listpacks, head first (none empty).
    List(Vec<Vec<u8>>),
    /// A hash's field/value pairs.
    Hash(Vec<(Vec<u8>, Vec<u8>)>),
    /// A sorted set's (member, score) pairs (any order; members distinct, no NaN).
    ZSet(Vec<(Vec<u8>, f64)>),
    /// A set's members (distinct).
    Set(Vec<Vec<u8>>),
    /// A set as validated intset bytes (RDB type 11), kept as they are.
    SetIntset(Vec<u8>),
    /// A stream: validated nodes and metadata.
    Stream(crate::collections::stream::Loaded),
}

impl Value {
    /// About how much arena the value takes once stored: its bytes plus a per-element
    /// allowance for links and headers (checked against the arena's room before a
    /// RESTORE writes anything).
    pub fn arena_bytes_estimate(&self) -> u64 {
        const PER_ELEMENT: u64 = 64;
        let sum = |lens: &mut dyn Iterator<Item = usize>| -> u64 {
            lens.map(|l| l as u64 + PER_ELEMENT).sum()
        };
        match self {
            Value::String(s) | Value::SetIntset(s) => s.len() as u64 + PER_ELEMENT,
            Value::List(nodes) => sum(&mut nodes.iter().map(Vec::len)),
            Value::Hash(pairs) => sum(&mut pairs.iter().map(|(f, v)| f.len() + v.len())),
            Value::ZSet(pairs) => sum(&mut pairs.iter().map(|(m, _)| m.len())),
            Value::Set(members) => sum(&mut members.iter().map(Vec::len)),
            Value::Stream(s) => s.arena_bytes(),
        }
    }
}

/// Quicklist node containers (Redis's QUICKLIST_NODE_CONTAINER_*).
const CONTAINER_PLAIN: u64 = 1;
const CONTAINER_PACKED: u64 = 2;

/// Elements of an untrusted listpack (validated first).
fn listpack_elems(lp: &[u8], pairs: bool) -> Result<Vec<Vec<u8>>, RdbError> {
    use crate::collections::listpack;
    if !listpack::validate(lp, pairs) {
        return Err(RdbError::Corrupt);
    }
    Ok(listpack::iter(lp).map(|v| v.to_vec()).collect())
}

/// A collection's element count, bounded by the input left (each element takes at least
/// one byte), so a forged count cannot make us allocate.
fn read_count(r: &mut Reader) -> Result<u64, RdbError> {
    let n = r.read_plain_len()?;
    if n > r.remaining() as u64 {
        return Err(RdbError::BadLength(n));
    }
    Ok(n)
}

fn read_list(t: u8, r: &mut Reader) -> Result<Value, RdbError> {
    use crate::collections::{list::NODE_LIMIT, listpack};
    let n = read_count(r)?;
    // Validated listpacks are kept as they are (no per-element copies: memory stays
    // proportional to the payload); loose elements are packed into 8 KiB listpacks.
    let mut out: Vec<Vec<u8>> = Vec::new();
    let mut cur = listpack::empty();
    let flush = |cur: &mut Vec<u8>, out: &mut Vec<Vec<u8>>| {
        if listpack::count(cur) > 0 {
            out.push(std::mem::replace(cur, listpack::empty()));
        }
    };
    for _ in 0..n {
        let container = if t == TYPE_LIST {
            CONTAINER_PLAIN
        } else {
            r.read_plain_len()?
        };
        let s = r.read_string()?;
        match container {
            CONTAINER_PLAIN => {
                if cur.len() + listpack::entry_len(&s) > NODE_LIMIT {
                    flush(&mut cur, &mut out);
                }
                let end = cur.len() - 1;
                listpack::push_vec(&mut cur, end, &s);
            }
            CONTAINER_PACKED => {
                if !listpack::validate(&s, false) {
                    return Err(RdbError::Corrupt);
                }
                flush(&mut cur, &mut out);
                if listpack::count(&s) > 0 {
                    out.push(s.into_owned());
                }
            }
            _ => return Err(RdbError::Corrupt),
        }
    }
    flush(&mut cur, &mut out);
    if out.is_empty() {
        return Err(RdbError::Corrupt);
    }
    Ok(Value::List(out))
}

fn read_hash(t: u8, r: &mut Reader) -> Result<Value, RdbError> {
    let mut out = Vec::new();
    if t == TYPE_HASH {
        let n = read_count(r)?;
        for _ in 0..n {
            let f = r.read_string()?.into_owned();
            let v = r.read_string()?.into_owned();
            out.push((f, v));
        }
    } else {
        let s = r.read_string()?;
        let mut it = listpack_elems(&s, true)?.into_iter();
        while let (Some(f), Some(v)) = (it.next(), it.next()) {
            out.push((f, v));
        }
    }
    // Redis refuses empty collections and duplicate fields.
    let mut seen = std::collections::HashSet::new();
    if out.is_empty() || !out.iter().all(|(f, _)| seen.insert(f.clone())) {
        return Err(RdbError::Corrupt);
    }
    Ok(Value::Hash(out))
}

fn read_set(t: u8, r: &mut Reader) -> Result<Value, RdbError> {
    use crate::collections::set::intset;
    let members = match t {
        TYPE_SET_INTSET => {
            let s = r.read_string()?;
            if !intset::validate(&s) || intset::len(&s) == 0 {
                return Err(RdbError::Corrupt);
            }
            return Ok(Value::SetIntset(s.into_owned()));
        }
        TYPE_SET => {
            let n = read_count(r)?;
            let mut out = Vec::with_capacity(n as usize);
            for _ in 0..n {
                out.push(r.read_string()?.into_owned());
            }
            out
        }
        _ => listpack_elems(&r.read_string()?, false)?,
    };
    // Redis refuses empty sets and duplicate members.
    let mut seen = std::collections::HashSet::with_capacity(members.len());
    if members.is_empty() || !members.iter().all(|m| seen.insert(m.as_slice())) {
        return Err(RdbError::Corrupt);
    }
    Ok(Value::Set(members))
}

/// Appends a set as RDB_TYPE_SET (count, then member strings).
pub fn write_set_object(out: &mut Vec<u8>, members: &[&[u8]]) {
    out.push(TYPE_SET);
    write_len(out, members.len() as u64);
    for m in members {
        write_string(out, m);
    }
}

/// Appends an intset-encoded set as RDB_TYPE_SET_INTSET (the intset bytes as they are).
pub fn write_set_intset_object(out: &mut Vec<u8>, is: &[u8]) {
    out.push(TYPE_SET_INTSET);
    write_len(out, is.len() as u64);
    out.extend_from_slice(is);
}

/// Appends a list as RDB_TYPE_LIST_QUICKLIST_2: one packed node per listpack.
pub fn write_list_object(out: &mut Vec<u8>, listpacks: &[&[u8]]) {
    out.push(TYPE_LIST_QUICKLIST_2);
    write_len(out, listpacks.len() as u64);
    for lp in listpacks {
        write_len(out, CONTAINER_PACKED);
        write_len(out, lp.len() as u64);
        out.extend_from_slice(lp);
    }
}

/// Appends a small hash as RDB_TYPE_HASH_LISTPACK (the listpack as is).
pub fn write_hash_listpack_object(out: &mut Vec<u8>, lp: &[u8]) {
    out.push(TYPE_HASH_LISTPACK);
    write_len(out, lp.len() as u64);
    out.extend_from_slice(lp);
}

/// Appends a hash as RDB_TYPE_HASH (count, then field and value strings).
pub fn write_hash_object(out: &mut Vec<u8>, pairs: &[(&[u8], &[u8])]) {
    out.push(TYPE_HASH);
    write_len(out, pairs.len() as u64);
    for (f, v) in pairs {
        write_string(out, f);
        write_string(out, v);
    }
}

/// Redis's `rdbLoadDoubleValue` (RDB_TYPE_ZSET's text scores): a length byte (253 NaN,
/// 254 +inf, 255 -inf) then that many ASCII characters.
fn read_text_double(r: &mut Reader) -> Result<f64, RdbError> {
    let n = r.read_u8()?;
    match n {
        253 => Ok(f64::NAN),
        254 => Ok(f64::INFINITY),
        255 => Ok(f64::NEG_INFINITY),
        n => {
            let b = r.read_bytes(n as usize)?;
            crate::collections::zset::parse_score_text(b).ok_or(RdbError::Corrupt)
        }
    }
}

/// Elements of an untrusted ziplist (RDB_TYPE_*_ZIPLIST, written by Redis before 7.0):
/// `[zlbytes u32][zltail u32][zllen u16] entries 0xFF`, each entry a prevlen (1 or 5
/// bytes), an encoding and its data. Every read is bounds-checked.
fn ziplist_elems(zl: &[u8]) -> Result<Vec<Vec<u8>>, RdbError> {
    let bad = || RdbError::Corrupt;
    if zl.len() < 11 || u32::from_le_bytes([zl[0], zl[1], zl[2], zl[3]]) as usize != zl.len() {
        return Err(bad());
    }
    if zl[zl.len() - 1] != 0xFF {
        return Err(bad());
    }
    let end = zl.len() - 1;
    let mut p = 10;
    let mut out = vec![];
    let take = |p: usize, n: usize| zl.get(p..p + n).filter(|_| p + n <= end).ok_or_else(bad);
    while p < end {
        p += if zl[p] == 0xFE { 5 } else { 1 };
        let b = *zl.get(p).filter(|_| p < end).ok_or_else(bad)?;
        let (hdr, v): (usize, Vec<u8>) = match b >> 6 {
            0 => {
                let n = (b & 0x3F) as usize;
                (1, take(p + 1, n)?.to_vec())
            }
            1 => {
                let n = (((b & 0x3F) as usize) << 8)
                    | *take(p + 1, 1)?.first().ok_or_else(bad)? as usize;
                (2, take(p + 2, n)?.to_vec())
            }
            2 => {
                let l = take(p + 1, 4)?;
                let n = u32::from_be_bytes([l[0], l[1], l[2], l[3]]) as usize;
                (5, take(p + 5, n)?.to_vec())
            }
            _ => {
                let (len, val): (usize, i64) = match b {
                    0xC0 => {
                        let d = take(p + 1, 2)?;
                        (2, i16::from_le_bytes([d[0], d[1]]) as i64)
                    }
                    0xD0 => {
                        let d = take(p + 1, 4)?;
                        (4, i32::from_le_bytes([d[0], d[1], d[2], d[3]]) as i64)
                    }
                    0xE0 => {
                        let d = take(p + 1, 8)?;
                        let mut a = [0u8; 8];
                        a.copy_from_slice(d);
                        (8, i64::from_le_bytes(a))
                    }
                    0xF0 => {
                        let d = take(p + 1, 3)?;
                        (3, (i32::from_le_bytes([0, d[0], d[1], d[2]]) >> 8) as i64)
                    }
                    0xFE => (1, take(p + 1, 1)?[0] as i8 as i64),
                    0xF1..=0xFD => (0, (b & 0x0F) as i64 - 1),
                    _ => return Err(bad()),
                };
                (1 + len, val.to_string().into_bytes())
            }
        };
        let data_len = match b >> 6 {
            0..=2 => v.len(),
            _ => 0,
        };
        p += hdr + data_len;
        out.push(v);
    }
    if p != end {
        return Err(bad());
    }
    Ok(out)
}

fn read_zset(t: u8, r: &mut Reader) -> Result<Value, RdbError> {
    let mut out: Vec<(Vec<u8>, f64)> = Vec::new();
    match t {
        TYPE_ZSET | TYPE_ZSET_2 => {
            let n = read_count(r)?;
            for _ in 0..n {
                let m = r.read_string()?.into_owned();
                let s = if t == TYPE_ZSET_2 {
                    f64::from_le_bytes(r.read_array::<8>()?)
                } else {
                    read_text_double(r)?
                };
                out.push((m, s));
            }
        }
        _ => {
            let s = r.read_string()?;
            let elems = if t == TYPE_ZSET_LISTPACK {
                listpack_elems(&s, true)?
            } else {
                ziplist_elems(&s)?
            };
            if elems.len() % 2 != 0 {
                return Err(RdbError::Corrupt);
            }
            let mut it = elems.into_iter();
            while let (Some(m), Some(sc)) = (it.next(), it.next()) {
                let s = crate::collections::zset::parse_score_text(&sc).ok_or(RdbError::Corrupt)?;
                out.push((m, s));
            }
        }
    }
    // Redis refuses empty sorted sets, duplicate members and NaN scores.
    let mut seen = std::collections::HashSet::new();
    if out.is_empty()
        || out.iter().any(|(_, s)| s.is_nan())
        || !out.iter().all(|(m, _)| seen.insert(m.clone()))
    {
        return Err(RdbError::Corrupt);
    }
    Ok(Value::ZSet(out))
}

/// Appends a small zset as RDB_TYPE_ZSET_LISTPACK (the listpack as is).
pub fn write_zset_listpack_object(out: &mut Vec<u8>, lp: &[u8]) {
    out.push(TYPE_ZSET_LISTPACK);
    write_len(out, lp.len() as u64);
    out.extend_from_slice(lp);
}

/// Appends a zset as RDB_TYPE_ZSET_2: count, then member strings and binary doubles
/// (little endian), in the order given (Redis writes from the greatest element down).
pub fn write_zset2_object(out: &mut Vec<u8>, items: &[(&[u8], f64)]) {
    out.push(TYPE_ZSET_2);
    write_len(out, items.len() as u64);
    for (m, s) in items {
        write_string(out, m);
        out.extend_from_slice(&s.to_le_bytes());
    }
}

/// A stream (RDB types 15, 19 and 21, as Redis's rdbLoadObject): the nodes (16-byte
/// big-endian master ID, listpack), the length and last ID, from type 19 the first ID,
/// the max deleted ID and the entries added, then the consumer groups (name, last ID,
/// from type 19 the entries read; the group PEL as raw IDs with delivery time and count;
/// the consumers with their seen time, from type 21 an active time, and their PELs as raw
/// IDs). Every node is checked entry by entry, and the whole for consistency: a consumer
/// may only name IDs of its group's PEL, each owned once, and every PEL entry must have
/// an owner (what Redis's deep sanitization requires).
fn read_stream(t: u8, r: &mut Reader) -> Result<Value, RdbError> {
    use crate::collections::stream::{self, Id, Loaded};
    use crate::collections::stream_groups::{self as sg, LoadedGroup};
    let n = read_count(r)?;
    let mut s = Loaded::default();
    for _ in 0..n {
        let key = r.read_string()?;
        let Ok(key) = <[u8; 16]>::try_from(&key[..]) else {
            return Err(RdbError::Corrupt);
        };
        let master = Id::from_be(&key);
        let l = r.read_string()?.into_owned();
        if !crate::collections::listpack::validate(&l, false)
            || stream::parse_node(&l, master).is_none()
        {
            return Err(RdbError::Corrupt);
        }
        s.nodes.push((master, l));
    }
    s.length = r.read_plain_len()?;
    s.last_id = Id::new(r.read_plain_len()?, r.read_plain_len()?);
    if t == TYPE_STREAM_LISTPACKS {
        s.entries_added = s.length;
    } else {
        s.first_id = Id::new(r.read_plain_len()?, r.read_plain_len()?);
        s.max_deleted_id = Id::new(r.read_plain_len()?, r.read_plain_len()?);
        s.entries_added = r.read_plain_len()?;
    }
    if t == TYPE_STREAM_LISTPACKS {
        // Type 15 has no first ID: the first live entry's (Redis's streamGetEdgeID).
        s.first_id = Id::MAX;
        'found: for (master, l) in &s.nodes {
            if let Some(view) = stream::parse_node(l, *master) {
                if let Some(e) = view.entries.iter().find(|e| !e.deleted()) {
                    s.first_id = e.id;
                    break 'found;
                }
            }
        }
    }
    let raw_id = |r: &mut Reader| -> Result<Id, RdbError> {
        let b = r.read_bytes(16)?;
        let mut k = [0u8; 16];
        k.copy_from_slice(b);
        Ok(Id::from_be(&k))
    };
    let ms_time = |r: &mut Reader| -> Result<i64, RdbError> {
        let b = r.read_bytes(8)?;
        let mut k = [0u8; 8];
        k.copy_from_slice(b);
        Ok(i64::from_le_bytes(k))
    };
    let groups = read_count(r)?;
    for _ in 0..groups {
        let mut g = LoadedGroup {
            name: r.read_string()?.into_owned(),
            last_id: Id::new(r.read_plain_len()?, r.read_plain_len()?),
            ..Default::default()
        };
        g.entries_read = if t == TYPE_STREAM_LISTPACKS {
            let meta = s.meta();
            sg::estimate_entries_read(&meta, g.last_id)
        } else {
            r.read_plain_len()? as i64
        };
        // Each PEL entry takes 16 + 8 + 1 bytes at least.
        let pel = read_count(r)?;
        if pel > (r.remaining() / 25) as u64 {
            return Err(RdbError::BadLength(pel));
        }
        for _ in 0..pel {
            let id = raw_id(r)?;
            let time = ms_time(r)?;
            let count = r.read_plain_len()?;
            g.pel.push((id, time, count));
        }
        let consumers = read_count(r)?;
        for _ in 0..consumers {
            let name = r.read_string()?.into_owned();
            let seen = ms_time(r)?;
            if t == TYPE_STREAM_LISTPACKS_3 {
                ms_time(r)?;
            }
            let k = read_count(r)?;
            if k > (r.remaining() / 16) as u64 {
                return Err(RdbError::BadLength(k));
            }
            let mut ids = Vec::with_capacity(k as usize);
            for _ in 0..k {
                ids.push(raw_id(r)?);
            }
            g.consumers.push((name, seen, ids));
        }
        s.groups.push(g);
    }
    if !s.consistent() {
        return Err(RdbError::Corrupt);
    }
    Ok(Value::Stream(s))
}

/// Appends a stream as RDB_TYPE_STREAM_LISTPACKS_2 (Redis 7.0's form): the node
/// listpacks as they are, the metadata, the consumer groups (`groups`, from
/// `stream_groups::export`).
pub fn write_stream_object(
    out: &mut Vec<u8>,
    nodes: &[(crate::collections::stream::Id, &[u8])],
    m: &crate::collections::stream::Meta,
    groups: &[crate::collections::stream_groups::LoadedGroup],
) {
    out.push(TYPE_STREAM_LISTPACKS_2);
    write_len(out, nodes.len() as u64);
    for (master, l) in nodes {
        write_string(out, &master.to_be());
        write_string(out, l);
    }
    write_len(out, m.length);
    for id in [m.last_id, m.first_id, m.max_deleted_id] {
        write_len(out, id.ms);
        write_len(out, id.seq);
    }
    write_len(out, m.entries_added);
    write_len(out, groups.len() as u64);
    for g in groups {
        write_string(out, &g.name);
        write_len(out, g.last_id.ms);
        write_len(out, g.last_id.seq);
        // Redis writes the invalid counter (-1) as an unsigned length.
        write_len(out, g.entries_read as u64);
        write_len(out, g.pel.len() as u64);
        for (id, time, count) in &g.pel {
            out.extend_from_slice(&id.to_be());
            out.extend_from_slice(&time.to_le_bytes());
            write_len(out, *count);
        }
        write_len(out, g.consumers.len() as u64);
        for (name, seen, ids) in &g.consumers {
            write_string(out, name);
            out.extend_from_slice(&seen.to_le_bytes());
            write_len(out, ids.len() as u64);
            for id in ids {
                out.extend_from_slice(&id.to_be());
            }
        }
    }
}

/// Reads a type byte and the value that follows (Redis's `rdbLoadObjectType` +
/// `rdbLoadObject`).
pub fn read_object(r: &mut Reader) -> Result<Value, RdbError> {
    let t = r.read_u8()?;
    read_value(t, r)
}

/// Reads the value of type `t`.
pub fn read_value(t: u8, r: &mut Reader) -> Result<Value, RdbError> {
    match t {
        TYPE_STRING => Ok(Value::String(r.read_string()?.into_owned())),
        TYPE_LIST | TYPE_LIST_QUICKLIST_2 => read_list(t, r),
        TYPE_HASH | TYPE_HASH_LISTPACK => read_hash(t, r),
        TYPE_ZSET | TYPE_ZSET_2 | TYPE_ZSET_ZIPLIST | TYPE_ZSET_LISTPACK => read_zset(t, r),
        TYPE_SET | TYPE_SET_INTSET | TYPE_SET_LISTPACK => read_set(t, r),
        TYPE_STREAM_LISTPACKS | TYPE_STREAM_LISTPACKS_2 | TYPE_STREAM_LISTPACKS_3 => {
            read_stream(t, r)
        }
        t if is_object_type(t) => Err(RdbError::UnsupportedType(t)),
        t => Err(RdbError::UnknownType(t)),
    }
}

/// Appends a length in its shortest form (Redis's `rdbSaveLen`).
pub fn write_len(out: &mut Vec<u8>, n: u64) {
    if n < 1 << 6 {
        out.push((LEN_6BIT << 6) | n as u8);
    } else if n < 1 << 14 {
        out.push((LEN_14BIT << 6) | (n >> 8) as u8);
        out.push(n as u8);
    } else if n <= u32::MAX as u64 {
        out.push(LEN_32BIT);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    } else {
        out.push(LEN_64BIT);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// Appends `v` in the shortest integer encoding, or returns false if it needs more than
/// 32 bits (Redis's `rdbEncodeInteger`).
fn write_int_encoded(out: &mut Vec<u8>, v: i64) -> bool {
    let special = LEN_ENCVAL << 6;
    if let Ok(b) = i8::try_from(v) {
        out.push(special | ENC_INT8);
        out.push(b as u8);
    } else if let Ok(h) = i16::try_from(v) {
        out.push(special | ENC_INT16);
        out.extend_from_slice(&h.to_le_bytes());
    } else if let Ok(w) = i32::try_from(v) {
        out.push(special | ENC_INT32);
        out.extend_from_slice(&w.to_le_bytes());
    } else {
        return false;
    }
    true
}

/// RDB opcode of a function library (Redis 7.0 GA: the library's code, shebang
/// included, as one string).
pub const OP_FUNCTION2: u8 = 245;
/// The 7.0 release candidates' library opcode: name, engine, optional description and
/// code as separate strings.
pub const OP_FUNCTION_PRE_GA: u8 = 246;

/// Appends one function library as RDB files and FUNCTION DUMP carry it.
pub fn write_function_library(out: &mut Vec<u8>, code: &[u8]) {
    out.push(OP_FUNCTION2);
    write_string(out, code);
}

/// Reads one library after its opcode `op` (Redis's rdbFunctionLoad): its code, with the
/// release candidates' form turned into the GA form (`#!<engine> name=<name>\n<code>`).
/// Err: Redis's text for what could not be read.
pub fn read_function_library(op: u8, r: &mut Reader) -> Result<Vec<u8>, String> {
    if op == OP_FUNCTION2 {
        return r
            .read_string()
            .map(|c| c.into_owned())
            .map_err(|_| "Failed loading library payload".to_string());
    }
    let name = r
        .read_string()
        .map_err(|_| "Failed loading library name".to_string())?;
    let engine = r
        .read_string()
        .map_err(|_| "Failed loading engine name".to_string())?;
    let has_desc = r
        .read_plain_len()
        .map_err(|_| "Failed loading library description indicator".to_string())?;
    if has_desc != 0 {
        r.read_string()
            .map_err(|_| "Failed loading library description".to_string())?;
    }
    let blob = r
        .read_string()
        .map_err(|_| "Failed loading library blob".to_string())?;
    let mut code = Vec::with_capacity(blob.len() + name.len() + engine.len() + 10);
    code.extend_from_slice(b"#!");
    code.extend_from_slice(&engine);
    code.extend_from_slice(b" name=");
    code.extend_from_slice(&name);
    code.push(b'\n');
    code.extend_from_slice(&blob);
    Ok(code)
}

/// The libraries of RDB function records (an image's section): a sequence of records
/// and nothing else.
pub fn read_function_libraries(records: &[u8]) -> Result<Vec<Vec<u8>>, String> {
    read_libraries_until(records, 0)
}

/// The libraries of a FUNCTION DUMP payload whose footer was checked: records are read
/// while more than the 10 footer bytes remain, and a record may run into the footer, as
/// Redis's FUNCTION RESTORE reads them (so a cut payload gets Redis's answer).
pub fn read_function_payload(payload: &[u8]) -> Result<Vec<Vec<u8>>, String> {
    read_libraries_until(payload, 10)
}

fn read_libraries_until(data: &[u8], footer: usize) -> Result<Vec<Vec<u8>>, String> {
    let mut r = Reader::new(data);
    let mut libs = Vec::new();
    while r.remaining() > footer {
        let op = r
            .read_u8()
            .map_err(|_| "can not read data type".to_string())?;
        if op != OP_FUNCTION2 && op != OP_FUNCTION_PRE_GA {
            return Err("given type is not a function".into());
        }
        libs.push(read_function_library(op, &mut r)?);
    }
    Ok(libs)
}

/// Appends a string as Redis does: the canonical decimal form of a 32-bit integer is
/// stored as that integer (so DUMP output matches Redis byte for byte for such values),
/// anything else as length + bytes. LZF compression is optional in the format and not used
/// here: every RDB reader accepts uncompressed strings.
pub fn write_string(out: &mut Vec<u8>, s: &[u8]) {
    // Only strings of at most 11 bytes can hold a 32-bit integer ("-2147483648").
    if s.len() <= 11 {
        if let Some(v) = crate::util::parse_i64(s) {
            if write_int_encoded(out, v) {
                return;
            }
        }
    }
    write_len(out, s.len() as u64);
    out.extend_from_slice(s);
}

/// Appends a string value with its type byte.
pub fn write_string_object(out: &mut Vec<u8>, s: &[u8]) {
    out.push(TYPE_STRING);
    write_string(out, s);
}

/// CRC-64/REDIS (Jones polynomial, reflected, init 0, no final xor), shared by RDB/DUMP
/// payloads and the AOF's entry checksums. `crc-fast` folds with carry-less multiplication
/// (PCLMULQDQ / VPCLMULQDQ where the CPU has them, tables elsewhere), several times faster
/// than the `crc` crate's slicing-by-16 tables. That matters because the executor checksums
/// every logged command under `appendonly yes`, a large value's whole payload included
/// (figures: BENCHMARKS.md, "AOF: `appendfsync always`, `everysec` and `no`").
fn crc64_params() -> crc_fast::CrcParams {
    static PARAMS: std::sync::OnceLock<crc_fast::CrcParams> = std::sync::OnceLock::new();
    *PARAMS.get_or_init(|| {
        crc_fast::CrcParams::new(
            "CRC-64/REDIS",
            64,
            0xad93_d235_94c9_35a9,
            0,
            true,
            0,
            0xe9c6_d914_c4b8_d9ca,
        )
    })
}

/// Redis's `crc64(0, data, len)`.
pub fn crc64(data: &[u8]) -> u64 {
    crc_fast::checksum_with_params(crc64_params(), data)
}

/// A running [`crc64`] over several pieces (`update`, then `finalize`).
pub fn crc64_digest() -> crc_fast::Digest {
    crc_fast::Digest::new_with_params(crc64_params())
}

/// Frames an encoded value as a DUMP payload: the value, the RDB version and a CRC-64 of
/// both, little endian.
pub fn dump_payload(mut value: Vec<u8>) -> Vec<u8> {
    value.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = crc64(&value);
    value.extend_from_slice(&crc.to_le_bytes());
    value
}

/// Checks a DUMP payload's footer (Redis's `verifyDumpPayload`): at least the 10 footer
/// bytes, an RDB version this server can read and a matching CRC. Returns the encoded
/// value without the footer.
pub fn verify_dump_payload(p: &[u8]) -> Option<&[u8]> {
    if p.len() < 10 {
        return None;
    }
    let (body, footer) = p.split_at(p.len() - 10);
    let version = u16::from_le_bytes([footer[0], footer[1]]);
    if version > RDB_VERSION {
        return None;
    }
    let mut want = [0u8; 8];
    want.copy_from_slice(&footer[2..]);
    if crc64(&p[..p.len() - 8]) != u64::from_le_bytes(want) {
        return None;
    }
    Some(body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::Rng;

    fn decode(payload: &[u8]) -> Result<Value, RdbError> {
        let body = verify_dump_payload(payload).ok_or(RdbError::Truncated)?;
        read_object(&mut Reader::new(body))
    }

    /// Found by the `restore_payload` fuzz target: a hash listpack whose last element's
    /// backlen runs on for more than five bytes made the backward walk shift past 64 bits
    /// (a panic in debug builds, a garbage offset in release).
    #[test]
    fn fuzz_regression_a_backlen_longer_than_five_bytes_is_refused() {
        let body = [
            0x10, 0x17, 0x17, 0x00, 0x00, 0x00, 0x04, 0xfb, 0x87, 0x99, 0xcd, 0xff, 0xff, 0xff,
            0xff, 0xff, 0xff, 0xff, 0x04, 0x03, 0x7b, 0x76, 0x34, 0x03, 0xff,
        ];
        assert!(decode(&dump_payload(body.to_vec())).is_err());
    }

    #[test]
    fn crc64_matches_redis() {
        // The check value of Redis's crc64.c self-test.
        assert_eq!(crc64(b"123456789"), 0xe9c6d914c4b8d9ca);
    }

    /// The folding implementation against the definition (bit by bit, reflected) at every
    /// length up to past its SIMD thresholds, whole and split in two digest updates.
    #[test]
    fn crc64_agrees_with_the_bitwise_definition() {
        fn bitwise(data: &[u8]) -> u64 {
            let mut crc = 0u64;
            for &b in data {
                crc ^= b as u64;
                for _ in 0..8 {
                    crc = if crc & 1 == 1 {
                        (crc >> 1) ^ 0x95ac_9329_ac4b_c9b5
                    } else {
                        crc >> 1
                    };
                }
            }
            crc
        }
        assert_eq!(bitwise(b"123456789"), 0xe9c6d914c4b8d9ca);
        let data: Vec<u8> = (0..3000u32)
            .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
            .collect();
        for len in (0..600).chain([1023, 1024, 1025, 2047, 2048, 2049, 3000]) {
            let d = &data[..len];
            let want = bitwise(d);
            assert_eq!(crc64(d), want, "len {len}");
            let cut = len / 3;
            let mut dg = crc64_digest();
            dg.update(&d[..cut]);
            dg.update(&d[cut..]);
            assert_eq!(dg.finalize(), want, "len {len} split at {cut}");
        }
    }

    #[test]
    fn decodes_payloads_made_by_redis_7_0() {
        // Bytes captured from redis-server 7.0.15 DUMP.
        let cases: &[(&[u8], &[u8])] = &[
            (b"\x00\x05hello\n\x00cr\xdfve4 \n", b"hello"),
            (b"\x00\xc0\x01\n\x00&x\xe7\xb6\xd1\x01\x11\xfc", b"1"),
            (b"\x00\xc190\n\x00\x9d\x94\xea'\x93\xfc\x08\xb9", b"12345"),
            (b"\x00\xc1\x7f\xff\n\x00\x17`\x82(T\x80\x84\x80", b"-129"),
            (
                b"\x00\xc2\xff\x7f\xff\xff\n\x00\xae\xe3LM\x06\xc6\x856",
                b"-32769",
            ),
            (
                b"\x00\n2147483648\n\x00\xe7\xb1)\xa3L\x1dv\xee",
                b"2147483648",
            ),
            (
                b"\x00\xc3\t0\x01aa\xe0#\x00\x01aa\n\x004\xc5\xf2\xcfHl\xd1\x8c",
                &[b'a'; 48],
            ),
        ];
        for (payload, want) in cases {
            assert_eq!(decode(payload), Ok(Value::String(want.to_vec())));
        }
    }

    #[test]
    fn encodes_like_redis() {
        let mut v = Vec::new();
        write_string_object(&mut v, b"hello");
        assert_eq!(dump_payload(v), b"\x00\x05hello\n\x00cr\xdfve4 \n");
        let mut v = Vec::new();
        write_string_object(&mut v, b"-32769");
        assert_eq!(
            dump_payload(v),
            b"\x00\xc2\xff\x7f\xff\xff\n\x00\xae\xe3LM\x06\xc6\x856"
        );
        // Non-canonical integers stay strings.
        for s in [&b"01"[..], b"-0", b"+1", b" 1"] {
            let mut v = Vec::new();
            write_string(&mut v, s);
            assert_eq!(v[0] as usize, s.len());
        }
    }

    #[test]
    fn lengths_round_trip_in_every_form() {
        for n in [
            0u64,
            63,
            64,
            16383,
            16384,
            u32::MAX as u64,
            u32::MAX as u64 + 1,
            u64::MAX,
        ] {
            let mut v = Vec::new();
            write_len(&mut v, n);
            let expected_size = match n {
                0..=63 => 1,
                64..=16383 => 2,
                16384..=0xFFFF_FFFF => 5,
                _ => 9,
            };
            assert_eq!(v.len(), expected_size, "{n}");
            let mut r = Reader::new(&v);
            assert_eq!(r.read_len(), Ok(Len::Plain(n)));
            assert!(r.is_empty());
        }
        assert_eq!(
            Reader::new(&[0x82]).read_len(),
            Err(RdbError::BadLengthEncoding(0x82))
        );
    }

    #[test]
    fn strings_round_trip() {
        let mut samples: Vec<Vec<u8>> = vec![
            vec![],
            b"0".to_vec(),
            b"-128".to_vec(),
            b"127".to_vec(),
            b"-2147483648".to_vec(),
            b"2147483647".to_vec(),
            b"-2147483649".to_vec(),
            b"9223372036854775807".to_vec(),
            vec![0xFF; 63],
            vec![7; 64],
            vec![1; 16384],
            vec![2; 70000],
        ];
        let mut rng = Rng::new(3);
        for _ in 0..200 {
            let len = rng.below(300) as usize;
            samples.push((0..len).map(|_| rng.next_u64() as u8).collect());
        }
        for s in samples {
            let mut v = Vec::new();
            write_string_object(&mut v, &s);
            let p = dump_payload(v);
            assert_eq!(decode(&p), Ok(Value::String(s)));
        }
    }

    #[test]
    fn lzf_rejects_corrupt_streams() {
        // Back reference before the start.
        assert_eq!(lzf_decompress(&[0x20, 0x00], 3), Err(RdbError::Lzf));
        // Literal run past the end of the input.
        assert_eq!(lzf_decompress(&[0x05, b'a'], 6), Err(RdbError::Lzf));
        // Output longer than declared.
        assert_eq!(lzf_decompress(&[0x01, b'a', b'b'], 1), Err(RdbError::Lzf));
        // Output shorter than declared.
        assert_eq!(lzf_decompress(&[0x01, b'a', b'b'], 3), Err(RdbError::Lzf));
        // A declared size no LZF stream of this length can reach.
        assert_eq!(lzf_decompress(&[0x00, b'a'], 1 << 40), Err(RdbError::Lzf));
        assert_eq!(
            lzf_decompress(&[0x01, b'a', b'b', 0xe0, 0x01, 0x01], 2 + 10),
            Ok(b"abababababab".to_vec())
        );
    }

    #[test]
    fn max_string_len_bounds_allocations() {
        let mut v = Vec::new();
        write_string(&mut v, &[b'x'; 100]);
        let mut r = Reader::new(&v).with_max_string_len(99);
        assert_eq!(r.read_string(), Err(RdbError::BadLength(100)));
        // An LZF header claiming a huge size fails before allocating.
        let lzf = [0xC3, 0x02, 0x81, 0, 0, 0, 1, 0, 0, 0, 0, 0x00, b'a'];
        assert!(Reader::new(&lzf).read_string().is_err());
    }

    #[test]
    fn lists_and_hashes_decode_from_redis_bytes() {
        // Redis 7.0.15: RPUSH l a b -> DUMP body (quicklist 2, one packed node).
        let body = [
            0x12, 0x01, 0x02, 0x0d, 0x0d, 0, 0, 0, 2, 0, 0x81, b'a', 2, 0x81, b'b', 2, 0xff,
        ];
        let lp = body[4..].to_vec();
        assert_eq!(
            read_object(&mut Reader::new(&body)),
            Ok(Value::List(vec![lp.clone()]))
        );
        let mut out = vec![];
        write_list_object(&mut out, &[&lp]);
        assert_eq!(out, body);
        // HSET h a b -> hash listpack.
        let body = [
            0x10, 0x0d, 0x0d, 0, 0, 0, 2, 0, 0x81, b'a', 2, 0x81, b'b', 2, 0xff,
        ];
        assert_eq!(
            read_object(&mut Reader::new(&body)),
            Ok(Value::Hash(vec![(b"a".to_vec(), b"b".to_vec())]))
        );
        // Plain RDB_TYPE_LIST / RDB_TYPE_HASH forms.
        let list = [TYPE_LIST, 2, 1, b'x', 1, b'y'];
        let Ok(Value::List(lps)) = read_object(&mut Reader::new(&list)) else {
            panic!("list");
        };
        assert_eq!(
            lps,
            vec![crate::collections::listpack::build([&b"x"[..], b"y"])]
        );
        let hash = [TYPE_HASH, 1, 1, b'f', 1, b'v'];
        assert!(read_object(&mut Reader::new(&hash)).is_ok());
        // Corrupt: bad listpack, odd hash listpack, duplicate field, empty list.
        let mut bad = body;
        bad[8] = 0x85;
        assert_eq!(read_object(&mut Reader::new(&bad)), Err(RdbError::Corrupt));
        let dup = [TYPE_HASH, 2, 1, b'f', 1, b'v', 1, b'f', 1, b'w'];
        assert_eq!(read_object(&mut Reader::new(&dup)), Err(RdbError::Corrupt));
        assert_eq!(
            read_object(&mut Reader::new(&[TYPE_LIST_QUICKLIST_2, 0])),
            Err(RdbError::Corrupt)
        );
        // A forged count larger than the input is refused before allocating.
        assert!(read_object(&mut Reader::new(&[TYPE_LIST, 0x80, 0xff, 0xff, 0xff, 0xff])).is_err());
    }

    #[test]
    fn zsets_decode_from_every_rdb_form() {
        // Redis 7.0.15: ZADD z 1 a 2.5 b -> DUMP body (zset listpack).
        let body = [
            0x11, 0x14, 0x14, 0, 0, 0, 4, 0, 0x81, b'a', 2, 1, 1, 0x81, b'b', 2, 0x83, b'2', b'.',
            b'5', 4, 0xff,
        ];
        let want = Value::ZSet(vec![(b"a".to_vec(), 1.0), (b"b".to_vec(), 2.5)]);
        assert_eq!(read_object(&mut Reader::new(&body)), Ok(want.clone()));
        let mut out = vec![];
        write_zset_listpack_object(&mut out, &body[2..]);
        assert_eq!(out, body);
        // ZSET_2: binary doubles.
        let mut z2 = vec![TYPE_ZSET_2, 2, 1, b'b'];
        z2.extend_from_slice(&2.5f64.to_le_bytes());
        z2.extend_from_slice(&[1, b'a']);
        z2.extend_from_slice(&1.0f64.to_le_bytes());
        let Ok(Value::ZSet(mut p)) = read_object(&mut Reader::new(&z2)) else {
            panic!("zset2");
        };
        p.reverse();
        assert_eq!(Value::ZSet(p), want);
        // ZSET (text doubles; 254 = +inf).
        let z1 = [TYPE_ZSET, 2, 1, b'a', 1, b'1', 1, b'b', 254];
        assert_eq!(
            read_object(&mut Reader::new(&z1)),
            Ok(Value::ZSet(vec![
                (b"a".to_vec(), 1.0),
                (b"b".to_vec(), f64::INFINITY)
            ]))
        );
        // ZSET_ZIPLIST: "a" 1 (immediate int), "b" "2.5".
        let entries: Vec<u8> = vec![
            0, 0x01, b'a', // prevlen 0, 6-bit string
            3, 0xF2, // prevlen 3, immediate 1
            2, 0x01, b'b', //
            3, 0x03, b'2', b'.', b'5', //
        ];
        let mut zl = vec![];
        let total = 10 + entries.len() + 1;
        zl.extend_from_slice(&(total as u32).to_le_bytes());
        zl.extend_from_slice(&[0, 0, 0, 0, 4, 0]);
        zl.extend_from_slice(&entries);
        zl.push(0xFF);
        let mut zz = vec![TYPE_ZSET_ZIPLIST, zl.len() as u8];
        zz.extend_from_slice(&zl);
        assert_eq!(read_object(&mut Reader::new(&zz)), Ok(want));
        // Corrupt: truncated ziplist, NaN score, duplicate member, empty.
        let mut bad = zz.clone();
        bad[1] -= 1;
        bad.truncate(bad.len() - 1);
        assert!(read_object(&mut Reader::new(&bad)).is_err());
        let nan = [TYPE_ZSET, 1, 1, b'a', 253];
        assert_eq!(read_object(&mut Reader::new(&nan)), Err(RdbError::Corrupt));
        let dup = [TYPE_ZSET, 2, 1, b'a', 1, b'1', 1, b'a', 1, b'2'];
        assert_eq!(read_object(&mut Reader::new(&dup)), Err(RdbError::Corrupt));
        assert_eq!(
            read_object(&mut Reader::new(&[TYPE_ZSET_2, 0])),
            Err(RdbError::Corrupt)
        );
    }

    #[test]
    fn other_types_are_reported_not_misread() {
        assert_eq!(
            read_object(&mut Reader::new(&[TYPE_HASH_ZIPMAP, 0])),
            Err(RdbError::UnsupportedType(TYPE_HASH_ZIPMAP))
        );
        // An empty stream declaring one consumer group it does not hold.
        let grouped = [TYPE_STREAM_LISTPACKS_2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
        assert!(read_object(&mut Reader::new(&grouped)).is_err());
        assert_eq!(
            read_object(&mut Reader::new(&[8])),
            Err(RdbError::UnknownType(8))
        );
        assert_eq!(
            read_object(&mut Reader::new(&[200])),
            Err(RdbError::UnknownType(200))
        );
    }

    #[test]
    fn footer_checks() {
        let mut v = Vec::new();
        write_string_object(&mut v, b"abc");
        let good = dump_payload(v);
        assert!(verify_dump_payload(&good).is_some());
        assert!(verify_dump_payload(&good[..9]).is_none());
        let mut bad_crc = good.clone();
        *bad_crc.last_mut().unwrap() ^= 1;
        assert!(verify_dump_payload(&bad_crc).is_none());
        // A newer RDB version is refused even with a valid CRC.
        let mut newer = good[..good.len() - 10].to_vec();
        newer.extend_from_slice(&11u16.to_le_bytes());
        let crc = crc64(&newer);
        newer.extend_from_slice(&crc.to_le_bytes());
        assert!(verify_dump_payload(&newer).is_none());
    }

    /// Fuzz-style: random bytes, and valid payloads with random corruption or truncation,
    /// must decode to a value or an error — never panic, never allocate wildly.
    #[test]
    fn corrupt_payloads_never_panic() {
        let mut rng = Rng::new(0xC0FFEE);
        let mut seeds: Vec<Vec<u8>> = Vec::new();
        for s in [&b"hello"[..], b"12345", b"-2147483648", &[b'z'; 300], b""] {
            let mut v = Vec::new();
            write_string_object(&mut v, s);
            seeds.push(v);
        }
        seeds.push(b"\x00\xc3\t0\x01aa\xe0#\x00\x01aa".to_vec());
        // Sorted sets: listpack, ZSET_2, ZSET with text scores, ziplist.
        seeds.push(b"\x11\x14\x14\0\0\0\x04\0\x81a\x02\x01\x01\x81b\x02\x832.5\x04\xff".to_vec());
        let mut z2 = vec![TYPE_ZSET_2, 2, 1, b'b'];
        z2.extend_from_slice(&2.5f64.to_le_bytes());
        z2.extend_from_slice(&[1, b'a']);
        z2.extend_from_slice(&1.0f64.to_le_bytes());
        seeds.push(z2);
        seeds.push(vec![TYPE_ZSET, 2, 1, b'a', 1, b'1', 1, b'b', 254]);
        seeds.push(vec![
            TYPE_ZSET_ZIPLIST,
            24,
            24,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            4,
            0,
            0,
            1,
            b'a',
            3,
            0xF2,
            2,
            1,
            b'b',
            3,
            3,
            b'2',
            b'.',
            b'5',
            0xFF,
        ]);
        for round in 0..200_000 {
            let body: Vec<u8> = if round % 3 == 0 {
                let len = rng.below(40) as usize;
                (0..len).map(|_| rng.next_u64() as u8).collect()
            } else {
                let mut v = seeds[rng.below(seeds.len() as u64) as usize].clone();
                let flips = 1 + rng.below(4);
                for _ in 0..flips {
                    if v.is_empty() {
                        break;
                    }
                    let i = rng.below(v.len() as u64) as usize;
                    v[i] = rng.next_u64() as u8;
                }
                if rng.below(4) == 0 {
                    let cut = rng.below(v.len() as u64 + 1) as usize;
                    v.truncate(cut);
                }
                v
            };
            // Straight to the decoder (corrupt bodies would rarely pass the CRC)...
            let mut r = Reader::new(&body).with_max_string_len(1 << 20);
            if let Ok(Value::String(s)) = read_object(&mut r) {
                assert!(s.len() <= 1 << 20);
            }
            // ...and through the framing, with a correct footer.
            let p = dump_payload(body);
            let _ = decode(&p);
            let _ = lzf_decompress(&p, rng.below(1000) as usize);
        }
    }
}
