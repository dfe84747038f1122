//! Redis's listpack byte format, so a small collection (or a quicklist node) is stored as
//! exactly the bytes Redis would keep: DUMP copies them as is and RESTORE only validates.
//!
//! Layout: `[total bytes u32 LE][element count u16 LE (65535 = unknown)] entries... 0xFF`.
//! An entry is an encoding byte (7-bit uint, 6/12/32-bit-length string, 13/16/24/32/64-bit
//! int), its data, and a "backlen" (the entry's length in 1–5 bytes, 7 bits each, readable
//! from its last byte) that makes backward traversal possible.
//! Strings that are canonical integers are stored as integers, as Redis does.

pub const HEADER: usize = 6;
pub const EOF: u8 = 0xFF;
const COUNT_UNKNOWN: usize = 65535;

/// An element as stored: bytes or an integer (replies print integers in decimal).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Val<'a> {
    Str(&'a [u8]),
    Int(i64),
}

impl Val<'_> {
    pub fn to_vec(self) -> Vec<u8> {
        match self {
            Val::Str(s) => s.to_vec(),
            Val::Int(i) => i.to_string().into_bytes(),
        }
    }
    /// Compares with a client's bytes (an integer matches its canonical decimal form).
    pub fn eq_bytes(self, b: &[u8]) -> bool {
        match self {
            Val::Str(s) => s == b,
            Val::Int(i) => b.len() <= 20 && crate::util::parse_i64(b) == Some(i),
        }
    }
}

/// An empty listpack.
pub fn empty() -> Vec<u8> {
    let mut v = vec![0u8; HEADER + 1];
    set_total(&mut v, HEADER + 1);
    v[HEADER] = EOF;
    v
}

pub fn total(lp: &[u8]) -> usize {
    u32::from_le_bytes([lp[0], lp[1], lp[2], lp[3]]) as usize
}
fn set_total(lp: &mut [u8], n: usize) {
    lp[..4].copy_from_slice(&(n as u32).to_le_bytes());
}
fn raw_count(lp: &[u8]) -> usize {
    u16::from_le_bytes([lp[4], lp[5]]) as usize
}
fn set_count(lp: &mut [u8], n: usize) {
    let n = n.min(COUNT_UNKNOWN) as u16;
    lp[4..6].copy_from_slice(&n.to_le_bytes());
}

/// Number of elements (counted by walking when the header says "unknown").
pub fn count(lp: &[u8]) -> usize {
    let c = raw_count(lp);
    if c < COUNT_UNKNOWN {
        return c;
    }
    let mut n = 0;
    let mut p = first(lp);
    while let Some(o) = p {
        n += 1;
        p = next(lp, o);
    }
    n
}

/// The compact form of a string if it is a canonical integer (Redis's lpStringToInt64).
fn as_int(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    crate::util::parse_i64(s)
}

fn backlen_size(l: usize) -> usize {
    match l {
        0..=127 => 1,
        128..=16382 => 2,
        16383..=2097150 => 3,
        2097151..=268435454 => 4,
        _ => 5,
    }
}

/// Encoding + data bytes of an element (without backlen).
fn body_len(s: &[u8]) -> usize {
    if let Some(i) = as_int(s) {
        return int_body_len(i);
    }
    str_header_len(s.len()) + s.len()
}
fn int_body_len(i: i64) -> usize {
    match i {
        0..=127 => 1,
        -4096..=4095 => 2,
        -32768..=32767 => 3,
        -8388608..=8388607 => 4,
        -2147483648..=2147483647 => 5,
        _ => 9,
    }
}
fn str_header_len(n: usize) -> usize {
    if n < 64 {
        1
    } else if n < 4096 {
        2
    } else {
        5
    }
}

/// Bytes an element takes inside a listpack (entry plus backlen).
pub fn entry_len(s: &[u8]) -> usize {
    let b = body_len(s);
    b + backlen_size(b)
}

/// Writes an element's entry into `out` (exactly `entry_len(s)` bytes).
fn write_entry(s: &[u8], out: &mut [u8]) {
    let mut w = 0;
    if let Some(i) = as_int(s) {
        match int_body_len(i) {
            1 => {
                out[0] = i as u8;
                w = 1;
            }
            2 => {
                let u = (i as u64) & 0x1FFF;
                out[0] = 0xC0 | (u >> 8) as u8;
                out[1] = u as u8;
                w = 2;
            }
            3 => {
                out[0] = 0xF1;
                out[1..3].copy_from_slice(&(i as i16).to_le_bytes());
                w = 3;
            }
            4 => {
                out[0] = 0xF2;
                out[1..4].copy_from_slice(&(i as i32).to_le_bytes()[..3]);
                w = 4;
            }
            5 => {
                out[0] = 0xF3;
                out[1..5].copy_from_slice(&(i as i32).to_le_bytes());
                w = 5;
            }
            _ => {
                out[0] = 0xF4;
                out[1..9].copy_from_slice(&i.to_le_bytes());
                w = 9;
            }
        }
    } else {
        let n = s.len();
        match str_header_len(n) {
            1 => {
                out[0] = 0x80 | n as u8;
                w = 1;
            }
            2 => {
                out[0] = 0xE0 | (n >> 8) as u8;
                out[1] = n as u8;
                w = 2;
            }
            _ => {
                out[0] = 0xF0;
                out[1..5].copy_from_slice(&(n as u32).to_le_bytes());
                w += 5;
            }
        }
        out[w..w + n].copy_from_slice(s);
        w += n;
    }
    // Backlen: most significant group first, every byte but the first flagged with 128,
    // so a reader walking backwards stops at the byte without the flag.
    let l = w;
    let bl = backlen_size(l);
    for k in 0..bl {
        let shift = 7 * (bl - 1 - k);
        let mut b = ((l >> shift) & 127) as u8;
        if k > 0 {
            b |= 128;
        }
        out[w + k] = b;
    }
}

/// Body length (encoding + data) of the entry at `off`, or None if malformed/out of bounds.
fn body_at(lp: &[u8], off: usize) -> Option<usize> {
    let b = *lp.get(off)?;
    let len = if b & 0x80 == 0 {
        1
    } else if b & 0xC0 == 0x80 {
        1 + (b & 0x3F) as usize
    } else if b & 0xE0 == 0xC0 {
        2
    } else if b & 0xF0 == 0xE0 {
        2 + (((b & 0x0F) as usize) << 8 | *lp.get(off + 1)? as usize)
    } else {
        match b {
            0xF0 => {
                let s = lp.get(off + 1..off + 5)?;
                5 + u32::from_le_bytes([s[0], s[1], s[2], s[3]]) as usize
            }
            0xF1 => 3,
            0xF2 => 4,
            0xF3 => 5,
            0xF4 => 9,
            _ => return None,
        }
    };
    Some(len)
}

/// Full size (with backlen) of the entry at `off`.
pub fn size_at(lp: &[u8], off: usize) -> usize {
    let b = body_at(lp, off).unwrap_or(0);
    b + backlen_size(b)
}

pub fn get(lp: &[u8], off: usize) -> Val<'_> {
    let b = lp[off];
    if b & 0x80 == 0 {
        Val::Int(b as i64)
    } else if b & 0xC0 == 0x80 {
        let n = (b & 0x3F) as usize;
        Val::Str(&lp[off + 1..off + 1 + n])
    } else if b & 0xE0 == 0xC0 {
        let u = ((b as u64 & 0x1F) << 8) | lp[off + 1] as u64;
        // Sign-extend 13 bits.
        Val::Int(((u << 51) as i64) >> 51)
    } else if b & 0xF0 == 0xE0 {
        let n = ((b & 0x0F) as usize) << 8 | lp[off + 1] as usize;
        Val::Str(&lp[off + 2..off + 2 + n])
    } else {
        let d = &lp[off + 1..];
        match b {
            0xF0 => {
                let n = u32::from_le_bytes([d[0], d[1], d[2], d[3]]) as usize;
                Val::Str(&lp[off + 5..off + 5 + n])
            }
            0xF1 => Val::Int(i16::from_le_bytes([d[0], d[1]]) as i64),
            0xF2 => Val::Int((i32::from_le_bytes([0, d[0], d[1], d[2]]) >> 8) as i64),
            0xF3 => Val::Int(i32::from_le_bytes([d[0], d[1], d[2], d[3]]) as i64),
            _ => Val::Int(i64::from_le_bytes([
                d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7],
            ])),
        }
    }
}

pub fn first(lp: &[u8]) -> Option<usize> {
    (lp[HEADER] != EOF).then_some(HEADER)
}
pub fn next(lp: &[u8], off: usize) -> Option<usize> {
    let o = off + size_at(lp, off);
    (lp[o] != EOF).then_some(o)
}
/// The most bytes a backlen takes (7 bits each: entries up to 2^35 bytes).
const MAX_BACKLEN_BYTES: usize = 5;

/// Offset of the entry ending just before `end` (walking the backlen), or None when the
/// backlen is malformed (more than [`MAX_BACKLEN_BYTES`] long, as Redis's
/// lpDecodeBacklen refuses) or points before the listpack.
fn entry_before(lp: &[u8], end: usize) -> Option<usize> {
    if end <= HEADER {
        return None;
    }
    let mut p = end - 1;
    let mut l = 0usize;
    for i in 0..MAX_BACKLEN_BYTES {
        let b = lp[p];
        l |= ((b & 127) as usize) << (7 * i);
        if b & 128 == 0 || p == 0 {
            return p.checked_sub(l);
        }
        p -= 1;
    }
    None
}
pub fn prev(lp: &[u8], off: usize) -> Option<usize> {
    entry_before(lp, off)
}
pub fn last(lp: &[u8]) -> Option<usize> {
    entry_before(lp, total(lp) - 1)
}

/// Offset of element `i` (negative counts from the end).
pub fn seek(lp: &[u8], i: i64) -> Option<usize> {
    if i >= 0 {
        let mut p = first(lp);
        for _ in 0..i {
            p = next(lp, p?);
        }
        p
    } else {
        let mut p = last(lp);
        for _ in 0..(-(i + 1)) {
            p = prev(lp, p?);
        }
        p
    }
}

pub fn iter(lp: &[u8]) -> impl Iterator<Item = Val<'_>> {
    let mut p = first(lp);
    std::iter::from_fn(move || {
        let o = p?;
        p = next(lp, o);
        Some(get(lp, o))
    })
}

/// Builds a listpack from elements.
pub fn build<'a>(elems: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut v = empty();
    for e in elems {
        let end = v.len() - 1;
        push_vec(&mut v, end, e);
    }
    v
}

/// Inserts into a Vec-held listpack at byte offset `off` (an entry start or the EOF byte).
pub fn push_vec(v: &mut Vec<u8>, off: usize, s: &[u8]) {
    let n = entry_len(s);
    let old = v.len();
    v.resize(old + n, 0);
    insert_in_place(v, off, s);
}

/// Inserts element `s` at `off` into `buf`, which holds a listpack of `total(buf)` bytes
/// and has at least `entry_len(s)` bytes of room after it.
pub fn insert_in_place(buf: &mut [u8], off: usize, s: &[u8]) {
    let t = total(buf);
    let n = entry_len(s);
    buf.copy_within(off..t, off + n);
    write_entry(s, &mut buf[off..off + n]);
    set_total(buf, t + n);
    let c = raw_count(buf);
    if c < COUNT_UNKNOWN {
        set_count(buf, c + 1);
    }
}

/// Overwrites the element at `off` with `s` when both encodings take the same bytes (a
/// counter's usual update: nothing after it moves); false, and nothing written, otherwise.
pub fn overwrite_same_size(buf: &mut [u8], off: usize, s: &[u8]) -> bool {
    let n = entry_len(s);
    if size_at(buf, off) != n || off + n > buf.len() {
        return false;
    }
    write_entry(s, &mut buf[off..off + n]);
    true
}

/// Removes the entry at `off` in place; returns the bytes the listpack shrank by.
pub fn delete_in_place(buf: &mut [u8], off: usize) -> usize {
    let t = total(buf);
    let n = size_at(buf, off);
    buf.copy_within(off + n..t, off);
    set_total(buf, t - n);
    let c = raw_count(buf);
    if c < COUNT_UNKNOWN {
        set_count(buf, c - 1);
    }
    n
}

/// Checks a listpack from an untrusted source (RESTORE): every entry in bounds, backlens
/// consistent, the count right (or unknown), the terminator at the end. `pairs` requires
/// an even count (hash listpacks).
pub fn validate(lp: &[u8], pairs: bool) -> bool {
    if lp.len() < HEADER + 1 || total(lp) != lp.len() || lp[lp.len() - 1] != EOF {
        return false;
    }
    let mut p = HEADER;
    let mut n = 0usize;
    while p < lp.len() - 1 {
        let Some(b) = body_at(lp, p) else {
            return false;
        };
        let size = b + backlen_size(b);
        if p + size > lp.len() - 1 {
            return false;
        }
        if entry_before(lp, p + size) != Some(p) {
            return false;
        }
        p += size;
        n += 1;
    }
    let c = raw_count(lp);
    (c == COUNT_UNKNOWN || c == n) && (!pairs || n.is_multiple_of(2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redis_bytes_for_small_strings() {
        // What Redis 7.0 DUMPs for RPUSH l a b.
        let lp = build([&b"a"[..], b"b"]);
        assert_eq!(
            lp,
            [0x0d, 0, 0, 0, 2, 0, 0x81, b'a', 2, 0x81, b'b', 2, 0xff]
        );
    }

    #[test]
    fn roundtrip_all_encodings() {
        let big = vec![b'x'; 5000];
        let mid = vec![b'y'; 300];
        let items: Vec<Vec<u8>> = vec![
            b"0".to_vec(),
            b"127".to_vec(),
            b"128".to_vec(),
            b"-4096".to_vec(),
            b"4095".to_vec(),
            b"-32768".to_vec(),
            b"8388607".to_vec(),
            b"-2147483648".to_vec(),
            b"9223372036854775807".to_vec(),
            b"-9223372036854775808".to_vec(),
            b"007".to_vec(),
            b"".to_vec(),
            b"hello".to_vec(),
            mid.clone(),
            big.clone(),
        ];
        let lp = build(items.iter().map(|v| v.as_slice()));
        assert!(validate(&lp, false));
        assert_eq!(count(&lp), items.len());
        let got: Vec<Vec<u8>> = iter(&lp).map(|v| v.to_vec()).collect();
        assert_eq!(got, items);
        // Backwards.
        let mut p = last(&lp);
        let mut back = vec![];
        while let Some(o) = p {
            back.push(get(&lp, o).to_vec());
            p = prev(&lp, o);
        }
        back.reverse();
        assert_eq!(back, items);
        assert_eq!(get(&lp, seek(&lp, -1).unwrap()).to_vec(), big);
        assert!(get(&lp, seek(&lp, 2).unwrap()).eq_bytes(b"128"));
    }

    #[test]
    fn insert_delete_in_place() {
        let mut v = build([&b"a"[..], b"c"]);
        let off = seek(&v, 1).unwrap();
        push_vec(&mut v, off, b"b");
        let got: Vec<Vec<u8>> = iter(&v).map(|x| x.to_vec()).collect();
        assert_eq!(got, vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]);
        let off = seek(&v, 0).unwrap();
        let n = delete_in_place(&mut v, off);
        v.truncate(v.len() - n);
        assert!(validate(&v, false));
        assert_eq!(count(&v), 2);
    }

    #[test]
    fn validate_rejects_garbage() {
        assert!(!validate(&[1, 2, 3], false));
        let mut lp = build([&b"abc"[..]]);
        lp[6] = 0x85; // claims 5 bytes
        assert!(!validate(&lp, false));
        assert!(!validate(&build([&b"a"[..]]), true));
    }
}
