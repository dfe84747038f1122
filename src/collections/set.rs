//! Set storage in the arena, with Redis 7.2's (and Valkey 8's) three encodings.
//!
//! Entry value byte 0 is a tag:
//! * `2` — intset (OBJECT ENCODING "intset"): Redis's intset bytes follow,
//!   `[encoding u32 LE: 2, 4 or 8][length u32 LE][sorted little-endian integers]`, so DUMP
//!   writes them as RDB type 11 unchanged. Used while every member is a canonical integer
//!   and there are at most `set-max-intset-entries` of them.
//! * `0` — listpack ("listpack"): a Redis listpack of the members, in insertion order. Used
//!   for small sets with a non-integer member: at most `set-max-listpack-entries` members,
//!   none longer than `set-max-listpack-value` bytes.
//! * `1` — hashtable ("hashtable"): `[1][pad 7][DictHeader]`; the dict's entries are arena
//!   blocks `[next Ref][member len u32][member]`.
//!
//! Conversions follow Redis 7.2's `setTypeAdd`: an intset that gets a non-integer member
//! becomes a listpack if the result fits the listpack limits, else a hashtable; an intset
//! that grows past its limit, or a listpack past its limits, becomes a hashtable. Nothing
//! converts back. (Redis 7.0 has no listpack sets: it goes straight from intset to
//! hashtable; see ARCHITECTURE.md.)

use super::listpack::{self as lp, Val};
use crate::arena::dict::DictHeader;
use crate::arena::dict::DictUse;
use crate::arena::validate::{Claims, Corrupt};
use crate::arena::{Arena, Ref, NULL};
use crate::keyspace::{Keyspace, Kind, Ttl};

/// Redis's OBJ_ENCODING_HT, OBJ_ENCODING_INTSET and OBJ_ENCODING_LISTPACK (the entry's
/// encoding byte, which OBJECT ENCODING reads).
pub const ENC_HT: u8 = 2;
pub const ENC_INTSET: u8 = 6;
pub const ENC_LISTPACK: u8 = 11;
const TAG_LP: u8 = 0;
const TAG_HT: u8 = 1;
const TAG_INTSET: u8 = 2;
const DICT_OFF: usize = 8;
pub const HT_BYTES: usize = DICT_OFF + std::mem::size_of::<DictHeader>();
/// Where a member starts in a dict entry.
const MEMBER_OFF: usize = 8;
/// Intset header: encoding and length.
const IS_HDR: usize = 8;
/// Largest intset or listpack kept inline whatever the config says (Redis's
/// lpSafeToAdd limit is 1 GiB); beyond it a set is a hashtable. Keeps the entry's u32
/// value length far from overflow.
const INLINE_MAX_BYTES: usize = 1 << 30;

/// The conversion thresholds (from the config).
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub max_intset: u64,
    pub max_lp_entries: u64,
    pub max_lp_value: u64,
}

impl Limits {
    pub fn from_settings(s: &crate::config::Settings) -> Limits {
        Limits {
            max_intset: s.set_max_intset_entries,
            max_lp_entries: s.set_max_listpack_entries,
            max_lp_value: s.set_max_listpack_value,
        }
    }
    pub fn from_config(c: &crate::config::Config) -> Limits {
        Limits::from_settings(c.settings())
    }
}

pub fn is_ht(v: &[u8]) -> bool {
    v.first() == Some(&TAG_HT)
}
pub fn read_dict(v: &[u8]) -> DictHeader {
    let b = &v[DICT_OFF..HT_BYTES];
    // SAFETY: DictHeader is Pod (any bit pattern is valid) and `b` holds size_of bytes.
    unsafe { std::ptr::read_unaligned(b.as_ptr() as *const DictHeader) }
}
fn write_dict(v: &mut [u8], d: &DictHeader) {
    // SAFETY: as `read_dict`; the destination holds size_of::<DictHeader>() bytes.
    unsafe { std::ptr::write_unaligned(v[DICT_OFF..HT_BYTES].as_mut_ptr() as *mut DictHeader, *d) }
}
fn ht_value(d: &DictHeader) -> Vec<u8> {
    let mut v = vec![0u8; HT_BYTES];
    v[0] = TAG_HT;
    write_dict(&mut v, d);
    v
}

/// A canonical integer member (what an intset may hold), as Redis's
/// isSdsRepresentableAsLongLong.
pub fn as_int(m: &[u8]) -> Option<i64> {
    if m.is_empty() || m.len() > 20 {
        return None;
    }
    crate::util::parse_i64(m)
}

// ---- intset bytes ------------------------------------------------------------------------------

pub mod intset {
    //! Redis's intset: `[encoding u32][length u32][sorted ints of `encoding` bytes each]`,
    //! little endian.
    use super::IS_HDR;

    pub fn width(is: &[u8]) -> usize {
        u32::from_le_bytes([is[0], is[1], is[2], is[3]]) as usize
    }
    pub fn len(is: &[u8]) -> usize {
        u32::from_le_bytes([is[4], is[5], is[6], is[7]]) as usize
    }
    pub fn get(is: &[u8], i: usize) -> i64 {
        let w = width(is);
        let p = IS_HDR + i * w;
        let b = &is[p..p + w];
        match w {
            2 => i16::from_le_bytes([b[0], b[1]]) as i64,
            4 => i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as i64,
            _ => i64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
        }
    }
    /// The narrowest encoding holding `v` (Redis's _intsetValueEncoding).
    pub fn width_for(v: i64) -> usize {
        if v >= i16::MIN as i64 && v <= i16::MAX as i64 {
            2
        } else if v >= i32::MIN as i64 && v <= i32::MAX as i64 {
            4
        } else {
            8
        }
    }
    /// Ok(index) if present, Err(insertion index) if not.
    pub fn search(is: &[u8], v: i64) -> Result<usize, usize> {
        let (mut lo, mut hi) = (0usize, len(is));
        while lo < hi {
            let mid = (lo + hi) / 2;
            let x = get(is, mid);
            if x == v {
                return Ok(mid);
            }
            if x < v {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        Err(lo)
    }
    pub fn empty() -> Vec<u8> {
        let mut v = vec![0u8; IS_HDR];
        v[..4].copy_from_slice(&2u32.to_le_bytes());
        v
    }
    fn put(out: &mut [u8], w: usize, i: usize, v: i64) {
        let p = IS_HDR + i * w;
        match w {
            2 => out[p..p + 2].copy_from_slice(&(v as i16).to_le_bytes()),
            4 => out[p..p + 4].copy_from_slice(&(v as i32).to_le_bytes()),
            _ => out[p..p + 8].copy_from_slice(&v.to_le_bytes()),
        }
    }
    /// Builds an intset from sorted, distinct values.
    pub fn build(vals: &[i64]) -> Vec<u8> {
        let w = vals.iter().map(|&v| width_for(v)).max().unwrap_or(2);
        let mut out = vec![0u8; IS_HDR + vals.len() * w];
        out[..4].copy_from_slice(&(w as u32).to_le_bytes());
        out[4..8].copy_from_slice(&(vals.len() as u32).to_le_bytes());
        for (i, &v) in vals.iter().enumerate() {
            put(&mut out, w, i, v);
        }
        out
    }
    /// Size after inserting `v` (absent) into `is`.
    pub fn grown_len(is: &[u8], v: i64) -> usize {
        let w = width(is).max(width_for(v));
        IS_HDR + (len(is) + 1) * w
    }
    /// Inserts absent `v` at index `at` into `buf`, which holds the intset and has room
    /// for `grown_len` bytes (the tail past the old intset is scratch).
    pub fn insert_in_place(buf: &mut [u8], at: usize, v: i64) {
        let (w, n) = (width(buf), len(buf));
        let nw = w.max(width_for(v));
        if nw != w {
            // Upgrade: rewrite from the end so nothing is overwritten before it is read
            // (the value goes first or last: it is outside the old range).
            for i in (0..n).rev() {
                let x = get(buf, i);
                let dst = if v < 0 { i + 1 } else { i };
                put(buf, nw, dst, x);
            }
            put(buf, nw, if v < 0 { 0 } else { n }, v);
            buf[..4].copy_from_slice(&(nw as u32).to_le_bytes());
        } else {
            let p = IS_HDR + at * w;
            buf.copy_within(p..IS_HDR + n * w, p + w);
            put(buf, w, at, v);
        }
        buf[4..8].copy_from_slice(&((n + 1) as u32).to_le_bytes());
    }
    /// Removes index `at` in place; returns the new byte length.
    pub fn remove_in_place(buf: &mut [u8], at: usize) -> usize {
        let (w, n) = (width(buf), len(buf));
        let p = IS_HDR + at * w;
        buf.copy_within(p + w..IS_HDR + n * w, p);
        buf[4..8].copy_from_slice(&((n - 1) as u32).to_le_bytes());
        IS_HDR + (n - 1) * w
    }
    /// Checks untrusted intset bytes (RESTORE): a known encoding, the length matching
    /// the size, values strictly ascending (Redis's intsetValidateIntegrity with deep
    /// checking).
    pub fn validate(is: &[u8]) -> bool {
        if is.len() < IS_HDR {
            return false;
        }
        let w = width(is);
        if !matches!(w, 2 | 4 | 8) {
            return false;
        }
        let n = len(is);
        if !(is.len() - IS_HDR).is_multiple_of(w) || (is.len() - IS_HDR) / w != n {
            return false;
        }
        (1..n).all(|i| get(is, i - 1) < get(is, i))
    }
}

// ---- dict entries --------------------------------------------------------------------------

fn me_member(a: &Arena, e: Ref) -> &[u8] {
    a.bytes(e, MEMBER_OFF, a.read_u32(e, 4) as usize)
}
fn me_size(a: &Arena, e: Ref) -> usize {
    MEMBER_OFF + a.read_u32(e, 4) as usize
}
fn me_new(a: &mut Arena, m: &[u8]) -> Ref {
    let e = a.alloc(MEMBER_OFF + m.len());
    a.write_u32(e, 0, NULL);
    a.write_u32(e, 4, m.len() as u32);
    a.bytes_mut(e, MEMBER_OFF, m.len()).copy_from_slice(m);
    e
}
fn me_free(a: &mut Arena, e: Ref) {
    let s = me_size(a, e);
    a.free(e, s);
}

/// Adds a member to a dict. Returns true if it was new.
fn dict_add(a: &mut Arena, d: &mut DictHeader, m: &[u8]) -> bool {
    let h = a.hash(m);
    if d.find(a, m, h).is_some() {
        return false;
    }
    let n = me_new(a, m);
    d.insert_new(a, n, h);
    true
}

// ---- out-of-line lifetime (called by the keyspace) ---------------------------------------------

pub fn ht_len(v: &[u8]) -> u64 {
    read_dict(v).len()
}

pub fn ht_free_all(a: &mut Arena, v: &[u8]) {
    let mut d = read_dict(v);
    while !d.destroy_some(a, usize::MAX, me_free) {}
}

/// Frees up to `budget` entries of a detached dict whose value header is in `hdr`.
pub fn ht_free_some(a: &mut Arena, hdr: &mut [u8], budget: usize) -> (u64, bool) {
    let mut d = read_dict(hdr);
    let before = d.len();
    let done = d.destroy_some(a, budget.max(1), me_free);
    write_dict(hdr, &d);
    (before - d.len(), done)
}

fn dict_entries(a: &Arena, d: &DictHeader) -> Vec<Ref> {
    let mut out = Vec::with_capacity(d.len() as usize);
    let mut c = 0;
    loop {
        c = d.scan(a, c, |e| out.push(e));
        if c == 0 {
            break;
        }
    }
    out
}

pub fn ht_bytes(a: &Arena, v: &[u8]) -> u64 {
    let d = read_dict(v);
    let mut sum = d.table_bytes();
    for e in dict_entries(a, &d) {
        sum += crate::arena::size_class(me_size(a, e)).1 as u64;
    }
    sum
}

pub fn ht_clone(a: &mut Arena, v: &[u8]) -> Vec<u8> {
    let src = read_dict(v);
    let members: Vec<Vec<u8>> = dict_entries(a, &src)
        .into_iter()
        .map(|e| me_member(a, e).to_vec())
        .collect();
    let mut d = DictHeader::new(MEMBER_OFF as u32);
    for m in &members {
        dict_add(a, &mut d, m);
    }
    ht_value(&d)
}

// ---- keyspace-level operations --------------------------------------------------------------

/// An inline (intset or listpack) set value, well formed.
pub fn inline_is_valid(v: &[u8]) -> bool {
    match v.first() {
        Some(&TAG_INTSET) => intset::validate(body(v)),
        Some(&TAG_LP) => lp::validate(body(v), false),
        _ => false,
    }
}

fn body(v: &[u8]) -> &[u8] {
    &v[1..]
}

pub fn len(ks: &Keyspace, e: Ref) -> u64 {
    let v = ks.value(e);
    match v[0] {
        TAG_HT => ht_len(v),
        TAG_INTSET => intset::len(body(v)) as u64,
        _ => lp::count(body(v)) as u64,
    }
}

/// Offset of member `m` in a set listpack.
fn lp_find(l: &[u8], m: &[u8]) -> Option<usize> {
    let mut p = lp::first(l);
    while let Some(o) = p {
        if lp::get(l, o).eq_bytes(m) {
            return Some(o);
        }
        p = lp::next(l, o);
    }
    None
}

pub fn contains(ks: &Keyspace, e: Ref, m: &[u8]) -> bool {
    let v = ks.value(e);
    match v[0] {
        TAG_HT => {
            let d = read_dict(v);
            d.find(&ks.arena, m, ks.arena.hash(m)).is_some()
        }
        TAG_INTSET => as_int(m).is_some_and(|i| intset::search(body(v), i).is_ok()),
        _ => lp_find(body(v), m).is_some(),
    }
}

/// Visits every member: intsets in ascending order, listpacks in insertion order,
/// hashtables in bucket order.
pub fn for_each(ks: &Keyspace, e: Ref, mut f: impl FnMut(Val)) {
    let v = ks.value(e);
    match v[0] {
        TAG_HT => {
            let d = read_dict(v);
            let a = &ks.arena;
            let mut c = 0;
            loop {
                c = d.scan(a, c, |x| f(Val::Str(me_member(a, x))));
                if c == 0 {
                    break;
                }
            }
        }
        TAG_INTSET => {
            let is = body(v);
            for i in 0..intset::len(is) {
                f(Val::Int(intset::get(is, i)));
            }
        }
        _ => lp::iter(body(v)).for_each(f),
    }
}

/// All members, owned.
pub fn members(ks: &Keyspace, e: Ref) -> Vec<Vec<u8>> {
    let mut out = Vec::with_capacity(len(ks, e) as usize);
    for_each(ks, e, |m| out.push(m.to_vec()));
    out
}

/// The encoding a new set starts with (Redis 7.2's setTypeCreate): an intset if the
/// first member is an integer and the expected size fits, a listpack if the size fits,
/// else a hashtable.
fn initial_value(first: &[u8], size_hint: u64, lim: Limits) -> (Vec<u8>, u8) {
    if as_int(first).is_some() && size_hint <= lim.max_intset {
        let mut v = vec![TAG_INTSET];
        v.extend_from_slice(&intset::empty());
        return (v, ENC_INTSET);
    }
    if size_hint <= lim.max_lp_entries {
        let mut v = vec![TAG_LP];
        v.extend_from_slice(&lp::empty());
        return (v, ENC_LISTPACK);
    }
    (ht_value(&DictHeader::new(MEMBER_OFF as u32)), ENC_HT)
}

/// Creates an empty set for `size_hint` members, `first` among them; the caller adds them
/// right after (Redis never keeps an empty set).
pub fn create(
    ks: &mut Keyspace,
    db: usize,
    key: &[u8],
    first: &[u8],
    size_hint: u64,
    lim: Limits,
    ttl: Ttl,
) -> Ref {
    let (v, enc) = initial_value(first, size_hint, lim);
    ks.set_value(db, key, Kind::Set, enc, &v, ttl)
}

/// Replaces the value by a hashtable holding the current members.
fn to_ht(ks: &mut Keyspace, db: usize, e: Ref) -> Ref {
    let ms = members(ks, e);
    let mut d = DictHeader::new(MEMBER_OFF as u32);
    for m in &ms {
        dict_add(&mut ks.arena, &mut d, m);
    }
    let e = ks.resize_value(db, e, HT_BYTES);
    ks.value_mut(e).copy_from_slice(&ht_value(&d));
    ks.set_enc_byte(e, ENC_HT);
    e
}

/// Replaces an intset by a listpack of its members.
fn intset_to_lp(ks: &mut Keyspace, db: usize, e: Ref) -> Ref {
    let ms = members(ks, e);
    let l = lp::build(ms.iter().map(|m| m.as_slice()));
    let e = ks.resize_value(db, e, 1 + l.len());
    let v = ks.value_mut(e);
    v[0] = TAG_LP;
    v[1..].copy_from_slice(&l);
    ks.set_enc_byte(e, ENC_LISTPACK);
    e
}

/// Decimal digits (with sign) of an integer, as Redis's sdigits10.
fn digits(v: i64) -> u64 {
    let mut n = if v < 0 { 2 } else { 1 };
    let mut u = v.unsigned_abs();
    while u >= 10 {
        u /= 10;
        n += 1;
    }
    n
}

/// Adds a member. Returns (entry, added).
pub fn add(ks: &mut Keyspace, db: usize, e: Ref, m: &[u8], lim: Limits) -> (Ref, bool) {
    let v = ks.value(e);
    match v[0] {
        TAG_HT => {
            let mut d = read_dict(v);
            let added = dict_add(&mut ks.arena, &mut d, m);
            if added {
                write_dict(ks.value_mut(e), &d);
            }
            (e, added)
        }
        TAG_INTSET => {
            let is = body(v);
            let n = intset::len(is) as u64;
            match as_int(m) {
                Some(i) => {
                    let Err(at) = intset::search(is, i) else {
                        return (e, false);
                    };
                    let new_len = intset::grown_len(is, i);
                    if n + 1 > lim.max_intset || new_len > INLINE_MAX_BYTES {
                        // Redis's maybeConvertIntset: too many integers, a hashtable.
                        let e = to_ht(ks, db, e);
                        return add(ks, db, e, m, lim);
                    }
                    let e = ks.resize_value(db, e, 1 + new_len);
                    intset::insert_in_place(&mut ks.value_mut(e)[1..], at, i);
                    (e, true)
                }
                None => {
                    // Redis 7.2: a listpack if the intset's members and the new one fit
                    // its limits, judged from the widest integer.
                    let maxlen = if n == 0 {
                        0
                    } else {
                        digits(intset::get(is, 0)).max(digits(intset::get(is, n as usize - 1)))
                    };
                    let e = if n < lim.max_lp_entries
                        && m.len() as u64 <= lim.max_lp_value
                        && maxlen <= lim.max_lp_value
                    {
                        intset_to_lp(ks, db, e)
                    } else {
                        to_ht(ks, db, e)
                    };
                    add(ks, db, e, m, lim)
                }
            }
        }
        _ => {
            let l = body(v);
            if lp_find(l, m).is_some() {
                return (e, false);
            }
            let t = lp::total(l);
            let el = lp::entry_len(m);
            if (lp::count(l) as u64) < lim.max_lp_entries
                && m.len() as u64 <= lim.max_lp_value
                && t + el <= INLINE_MAX_BYTES
            {
                // Append in place (no copy of the listpack).
                let e = ks.resize_value(db, e, 1 + t + el);
                lp::insert_in_place(&mut ks.value_mut(e)[1..], t - 1, m);
                return (e, true);
            }
            let e = to_ht(ks, db, e);
            add(ks, db, e, m, lim)
        }
    }
}

/// Removes a member. Returns (entry, removed). The caller deletes an emptied key.
pub fn remove(ks: &mut Keyspace, db: usize, e: Ref, m: &[u8]) -> (Ref, bool) {
    let v = ks.value(e);
    match v[0] {
        TAG_HT => {
            let mut d = read_dict(v);
            let h = ks.arena.hash(m);
            let Some(x) = d.find(&ks.arena, m, h) else {
                return (e, false);
            };
            d.unlink(&mut ks.arena, x, h);
            me_free(&mut ks.arena, x);
            d.shrink_if_sparse(&mut ks.arena);
            write_dict(ks.value_mut(e), &d);
            (e, true)
        }
        TAG_INTSET => {
            let Some(i) = as_int(m) else {
                return (e, false);
            };
            let Ok(at) = intset::search(body(v), i) else {
                return (e, false);
            };
            (remove_intset_at(ks, db, e, at), true)
        }
        _ => {
            let Some(o) = lp_find(body(v), m) else {
                return (e, false);
            };
            (remove_lp_at(ks, db, e, o), true)
        }
    }
}

fn remove_intset_at(ks: &mut Keyspace, db: usize, e: Ref, at: usize) -> Ref {
    let nl = intset::remove_in_place(&mut ks.value_mut(e)[1..], at);
    ks.resize_value(db, e, 1 + nl)
}

fn remove_lp_at(ks: &mut Keyspace, db: usize, e: Ref, off: usize) -> Ref {
    let n = lp::delete_in_place(&mut ks.value_mut(e)[1..], off);
    let vl = ks.value(e).len();
    ks.resize_value(db, e, vl - n)
}

/// A uniformly random member (for hashtables, `DictHeader::random_fair`).
pub fn random(ks: &mut Keyspace, e: Ref) -> Option<Vec<u8>> {
    let n = len(ks, e);
    if n == 0 {
        return None;
    }
    let v = ks.value(e);
    match v[0] {
        TAG_HT => {
            let d = read_dict(v);
            let x = d.random_fair(&ks.arena, &mut ks.rng)?;
            Some(me_member(&ks.arena, x).to_vec())
        }
        TAG_INTSET => {
            let i = ks.rng.below(n) as usize;
            Some(intset::get(body(ks.value(e)), i).to_string().into_bytes())
        }
        _ => {
            let i = ks.rng.below(n) as i64;
            let l = body(ks.value(e));
            let o = lp::seek(l, i)?;
            Some(lp::get(l, o).to_vec())
        }
    }
}

/// Removes and returns a random member. Returns (entry, member); the caller deletes an
/// emptied key.
pub fn pop_random(ks: &mut Keyspace, db: usize, e: Ref) -> (Ref, Option<Vec<u8>>) {
    let n = len(ks, e);
    if n == 0 {
        return (e, None);
    }
    let v = ks.value(e);
    match v[0] {
        TAG_HT => {
            let mut d = read_dict(v);
            let Some(x) = d.random_fair(&ks.arena, &mut ks.rng) else {
                return (e, None);
            };
            let m = me_member(&ks.arena, x).to_vec();
            let h = ks.arena.hash(&m);
            d.unlink(&mut ks.arena, x, h);
            me_free(&mut ks.arena, x);
            d.shrink_if_sparse(&mut ks.arena);
            write_dict(ks.value_mut(e), &d);
            (e, Some(m))
        }
        TAG_INTSET => {
            let i = ks.rng.below(n) as usize;
            let m = intset::get(body(ks.value(e)), i).to_string().into_bytes();
            (remove_intset_at(ks, db, e, i), Some(m))
        }
        _ => {
            let i = ks.rng.below(n) as i64;
            let l = body(ks.value(e));
            let Some(o) = lp::seek(l, i) else {
                return (e, None);
            };
            let m = lp::get(l, o).to_vec();
            (remove_lp_at(ks, db, e, o), Some(m))
        }
    }
}

/// One SSCAN step: (next cursor, members). Intsets and listpacks return everything at
/// once (cursor 0), as Redis.
pub fn scan(ks: &Keyspace, e: Ref, cursor: u64, count: u64) -> (u64, Vec<Vec<u8>>) {
    let v = ks.value(e);
    if !is_ht(v) {
        return (0, members(ks, e));
    }
    let d = read_dict(v);
    let a = &ks.arena;
    let mut out = vec![];
    let mut c = cursor;
    // Redis's maxiterations: at most count*10 buckets per call.
    let mut iters = count.saturating_mul(10).max(1);
    loop {
        c = d.scan(a, c, |x| out.push(me_member(a, x).to_vec()));
        iters -= 1;
        if c == 0 || iters == 0 || out.len() as u64 >= count {
            break;
        }
    }
    (c, out)
}

/// Creates a set from distinct members (RESTORE, RDB load, SINTERSTORE...), choosing the
/// encoding as Redis 7.2's loader does: an intset (or a hashtable if there are more
/// members than an intset may hold), converted as members are added.
pub fn create_from(
    ks: &mut Keyspace,
    db: usize,
    key: &[u8],
    members: &[Vec<u8>],
    ttl: Ttl,
    lim: Limits,
) -> Ref {
    let n = members.len() as u64;
    let (v, enc) = if n > lim.max_intset {
        (ht_value(&DictHeader::new(MEMBER_OFF as u32)), ENC_HT)
    } else {
        let mut v = vec![TAG_INTSET];
        v.extend_from_slice(&intset::empty());
        (v, ENC_INTSET)
    };
    let mut e = ks.set_value(db, key, Kind::Set, enc, &v, ttl);
    // All integers and few enough: build the intset at once (sorted) rather than by
    // insertion.
    if enc == ENC_INTSET {
        let ints: Option<Vec<i64>> = members.iter().map(|m| as_int(m)).collect();
        if let Some(mut ints) = ints {
            ints.sort_unstable();
            ints.dedup();
            let is = intset::build(&ints);
            e = ks.resize_value(db, e, 1 + is.len());
            ks.value_mut(e)[1..].copy_from_slice(&is);
            return e;
        }
    }
    for m in members {
        e = add(ks, db, e, m, lim).0;
    }
    e
}

/// Creates a set from a validated intset (RDB type 11): kept as is when it fits
/// `set-max-intset-entries`, else converted to a hashtable (Redis 7.2's loader).
pub fn create_from_intset(
    ks: &mut Keyspace,
    db: usize,
    key: &[u8],
    is: &[u8],
    ttl: Ttl,
    lim: Limits,
) -> Ref {
    let mut v = vec![TAG_INTSET];
    v.extend_from_slice(is);
    let e = ks.set_value(db, key, Kind::Set, ENC_INTSET, &v, ttl);
    if intset::len(is) as u64 > lim.max_intset {
        return to_ht(ks, db, e);
    }
    e
}

/// How a set is stored, for writers of formats that keep the encoding (DUMP, RDB).
pub enum Encoded<'a> {
    /// Redis's intset bytes.
    Intset(&'a [u8]),
    /// Listpack bytes.
    Listpack(&'a [u8]),
    /// A hashtable: read it with [`for_each`] or [`members`].
    Table,
}

pub fn encoded(ks: &Keyspace, e: Ref) -> Encoded<'_> {
    let v = ks.value(e);
    match v[0] {
        TAG_INTSET => Encoded::Intset(body(v)),
        TAG_LP => Encoded::Listpack(body(v)),
        _ => Encoded::Table,
    }
}

// ---- image validation ----------------------------------------------------------------------

/// Checks a set value restored from a snapshot image (`live`: a key's value; otherwise
/// the header a value-graveyard node keeps of a detached table being freed). `at`: where
/// the value lies.
pub fn validate(
    a: &Arena,
    claims: &mut Claims,
    v: &[u8],
    live: bool,
    at: u64,
) -> Result<(), Corrupt> {
    let inline_ok = inline_is_valid(v);
    if live && inline_ok {
        return Ok(());
    }
    if !is_ht(v) {
        return Err(Corrupt::new(
            "set value is not a valid intset, listpack or table",
            at,
        ));
    }
    super::check_header_len(v, live, HT_BYTES, "set table header", at)?;
    let usage = DictUse::of(live);
    read_dict(v).validate(a, claims, MEMBER_OFF as u32, usage, at, |a, claims, e| {
        claims.peek(e, MEMBER_OFF as u64, "set member")?;
        claims.claim(e, MEMBER_OFF as u64 + a.read_u32(e, 4) as u64, "set member")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lim() -> Limits {
        Limits {
            max_intset: 512,
            max_lp_entries: 128,
            max_lp_value: 64,
        }
    }

    #[test]
    fn intset_bytes_are_redis_bytes() {
        let is = intset::build(&[1, 2, 3]);
        assert_eq!(is, [2, 0, 0, 0, 3, 0, 0, 0, 1, 0, 2, 0, 3, 0]);
        assert!(intset::validate(&is));
        let mut buf = is.clone();
        buf.resize(intset::grown_len(&is, 70000), 0);
        intset::insert_in_place(&mut buf, 3, 70000);
        assert_eq!(intset::width(&buf), 4);
        assert_eq!(
            (0..4).map(|i| intset::get(&buf, i)).collect::<Vec<_>>(),
            [1, 2, 3, 70000]
        );
        let mut buf2 = buf.clone();
        buf2.resize(intset::grown_len(&buf, -(1 << 40)), 0);
        intset::insert_in_place(&mut buf2, 0, -(1 << 40));
        assert_eq!(intset::width(&buf2), 8);
        assert_eq!(
            (0..5).map(|i| intset::get(&buf2, i)).collect::<Vec<_>>(),
            [-(1 << 40), 1, 2, 3, 70000]
        );
        assert!(intset::validate(&buf2));
        let mut bad = is.clone();
        bad[8] = 9; // 9, 2, 3: not ascending
        assert!(!intset::validate(&bad));
        assert!(!intset::validate(&is[..13]));
        assert!(!intset::validate(&[3, 0, 0, 0, 0, 0, 0, 0]));
    }

    #[test]
    fn encodings_convert_and_free() {
        let mut k = crate::collections::new_keyspace(Arena::new(1 << 30, [3, 4]).unwrap(), 1);
        let used0 = k.arena.used_bytes();
        let mut e = create(&mut k, 0, b"s", b"5", 1, lim(), Ttl::Clear);
        assert_eq!(k.enc(e), ENC_INTSET);
        for i in (0..512).rev() {
            e = add(&mut k, 0, e, i.to_string().as_bytes(), lim()).0;
        }
        assert_eq!(k.enc(e), ENC_INTSET);
        assert_eq!(len(&k, e), 512);
        assert!(!add(&mut k, 0, e, b"7", lim()).1);
        assert!(contains(&k, e, b"511") && !contains(&k, e, b"512") && !contains(&k, e, b"07"));
        let first: Vec<Vec<u8>> = members(&k, e).into_iter().take(3).collect();
        assert_eq!(first, [b"0".to_vec(), b"1".to_vec(), b"2".to_vec()]);
        e = add(&mut k, 0, e, b"512", lim()).0;
        assert_eq!(k.enc(e), ENC_HT);
        assert_eq!(len(&k, e), 513);
        // Intset -> listpack on a string member; listpack -> hashtable past its limits.
        let mut t = create(&mut k, 0, b"t", b"1", 1, lim(), Ttl::Clear);
        t = add(&mut k, 0, t, b"1", lim()).0;
        t = add(&mut k, 0, t, b"abc", lim()).0;
        assert_eq!(k.enc(t), ENC_LISTPACK);
        assert!(contains(&k, t, b"1") && contains(&k, t, b"abc"));
        for i in 0..126 {
            t = add(&mut k, 0, t, format!("m{i}").as_bytes(), lim()).0;
        }
        assert_eq!((k.enc(t), len(&k, t)), (ENC_LISTPACK, 128));
        t = add(&mut k, 0, t, b"one-more", lim()).0;
        assert_eq!((k.enc(t), len(&k, t)), (ENC_HT, 129));
        let (t, r) = remove(&mut k, 0, t, b"m5");
        assert!(r && !contains(&k, t, b"m5"));
        let mut u = create(&mut k, 0, b"u", b"x", 1, lim(), Ttl::Clear);
        u = add(&mut k, 0, u, &[b'x'; 65], lim()).0;
        assert_eq!(k.enc(u), ENC_HT);
        // Popping everything.
        let mut seen = std::collections::HashSet::new();
        let mut e = k.find_raw(0, b"s").unwrap();
        for _ in 0..513 {
            let (ne, m) = pop_random(&mut k, 0, e);
            e = ne;
            assert!(seen.insert(m.unwrap()));
        }
        assert_eq!(len(&k, e), 0);
        let c = k.clone_entry_to(t, 0, b"copy", Ttl::Keep);
        assert_eq!(len(&k, c), 128);
        for key in [&b"s"[..], b"t", b"u", b"copy"] {
            k.delete(0, key, 0);
        }
        while k.lazyfree_step(100) {}
        assert!(k.arena.used_bytes() - used0 <= 64);
    }
}
