//! Hash storage in the arena, with Redis 7.0's two encodings.
//!
//! Entry value byte 0 is a tag:
//! * `0` — listpack (OBJECT ENCODING "listpack"): a Redis listpack of field, value, field,
//!   value... follows, in insertion order. Used while the hash has at most
//!   `hash-max-listpack-entries` fields and no field or value longer than
//!   `hash-max-listpack-value` bytes.
//! * `1` — hashtable ("hashtable"): `[1][pad 7][DictHeader]`; the dict's entries are arena
//!   blocks `[next Ref][field len u32][value len u32][field][value]`.
//!
//! Like Redis 7.0, a hash converts to a hashtable when a threshold is crossed and never
//! converts back.

use super::listpack::{self as lp, Val};
use crate::arena::dict::DictHeader;
use crate::arena::dict::DictUse;
use crate::arena::validate::{Claims, Corrupt};
use crate::arena::{Arena, Ref, NULL};
use crate::keyspace::{Keyspace, Kind, Ttl};

/// Redis's OBJ_ENCODING_HT and OBJ_ENCODING_LISTPACK (the entry's encoding byte).
pub const ENC_HT: u8 = 2;
pub const ENC_LISTPACK: u8 = 11;
const TAG_HT: u8 = 1;
const DICT_OFF: usize = 8;
pub const HT_BYTES: usize = DICT_OFF + std::mem::size_of::<DictHeader>();
/// Where a field starts in a dict entry.
const FIELD_OFF: usize = 12;

/// The conversion thresholds (from the config).
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub max_entries: u64,
    pub max_value: u64,
}

impl Limits {
    pub fn from_config(c: &crate::config::Config) -> Limits {
        let s = c.settings();
        Limits {
            max_entries: s.hash_max_listpack_entries,
            max_value: s.hash_max_listpack_value,
        }
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

// ---- dict entries --------------------------------------------------------------------------

fn fe_field(a: &Arena, e: Ref) -> &[u8] {
    a.bytes(e, FIELD_OFF, a.read_u32(e, 4) as usize)
}
fn fe_value(a: &Arena, e: Ref) -> &[u8] {
    let fl = a.read_u32(e, 4) as usize;
    a.bytes(e, FIELD_OFF + fl, a.read_u32(e, 8) as usize)
}
fn fe_size(a: &Arena, e: Ref) -> usize {
    FIELD_OFF + a.read_u32(e, 4) as usize + a.read_u32(e, 8) as usize
}
fn fe_new(a: &mut Arena, f: &[u8], v: &[u8]) -> Ref {
    let e = a.alloc(FIELD_OFF + f.len() + v.len());
    a.write_u32(e, 0, NULL);
    a.write_u32(e, 4, f.len() as u32);
    a.write_u32(e, 8, v.len() as u32);
    a.bytes_mut(e, FIELD_OFF, f.len()).copy_from_slice(f);
    a.bytes_mut(e, FIELD_OFF + f.len(), v.len())
        .copy_from_slice(v);
    e
}
fn fe_free(a: &mut Arena, e: Ref) {
    let s = fe_size(a, e);
    a.free(e, s);
}

/// Sets a field in a dict (insert or replace). Returns true if the field is new.
fn dict_set(a: &mut Arena, d: &mut DictHeader, f: &[u8], v: &[u8]) -> bool {
    let h = a.hash(f);
    let n = fe_new(a, f, v);
    match d.find(a, f, h) {
        Some(old) => {
            d.replace(a, old, n, h);
            fe_free(a, old);
            false
        }
        None => {
            d.insert_new(a, n, h);
            true
        }
    }
}

// ---- out-of-line lifetime (called by the keyspace) ---------------------------------------------

pub fn ht_len(v: &[u8]) -> u64 {
    read_dict(v).len()
}

pub fn ht_free_all(a: &mut Arena, v: &[u8]) {
    let mut d = read_dict(v);
    while !d.destroy_some(a, usize::MAX, fe_free) {}
}

/// Frees up to `budget` entries of a detached dict whose value header is in `hdr`.
pub fn ht_free_some(a: &mut Arena, hdr: &mut [u8], budget: usize) -> (u64, bool) {
    let mut d = read_dict(hdr);
    let before = d.len();
    let done = d.destroy_some(a, budget.max(1), fe_free);
    write_dict(hdr, &d);
    (before - d.len(), done)
}

pub fn ht_bytes(a: &Arena, v: &[u8]) -> u64 {
    let d = read_dict(v);
    let mut sum = d.table_bytes();
    let mut c = 0;
    loop {
        c = d.scan(a, c, |e| {
            sum += crate::arena::size_class(fe_size(a, e)).1 as u64;
        });
        if c == 0 {
            break;
        }
    }
    sum
}

pub fn ht_clone(a: &mut Arena, v: &[u8]) -> Vec<u8> {
    let src = read_dict(v);
    let mut pairs = vec![];
    let mut c = 0;
    loop {
        c = src.scan(a, c, |e| pairs.push(e));
        if c == 0 {
            break;
        }
    }
    let mut d = DictHeader::new(FIELD_OFF as u32);
    for e in pairs {
        let f = fe_field(a, e).to_vec();
        let val = fe_value(a, e).to_vec();
        dict_set(a, &mut d, &f, &val);
    }
    ht_value(&d)
}

// ---- keyspace-level operations --------------------------------------------------------------

/// An inline (listpack) hash value, well formed.
pub fn inline_is_valid(v: &[u8]) -> bool {
    !is_ht(v) && v.first() == Some(&0) && lp::validate(inline_lp(v), true)
}

fn inline_lp(v: &[u8]) -> &[u8] {
    &v[1..]
}

pub fn len(ks: &Keyspace, e: Ref) -> u64 {
    let v = ks.value(e);
    if is_ht(v) {
        ht_len(v)
    } else {
        (lp::count(inline_lp(v)) / 2) as u64
    }
}

/// Offset of `f`'s field entry in a hash listpack.
fn lp_find(l: &[u8], f: &[u8]) -> Option<usize> {
    let mut p = lp::first(l);
    while let Some(o) = p {
        let vo = lp::next(l, o)?;
        if lp::get(l, o).eq_bytes(f) {
            return Some(o);
        }
        p = lp::next(l, vo);
    }
    None
}

/// A field's value.
pub fn get<'a>(ks: &'a Keyspace, e: Ref, f: &[u8]) -> Option<Val<'a>> {
    let v = ks.value(e);
    if is_ht(v) {
        let d = read_dict(v);
        let h = ks.arena.hash(f);
        d.find(&ks.arena, f, h)
            .map(|x| Val::Str(fe_value(&ks.arena, x)))
    } else {
        let l = inline_lp(v);
        let o = lp_find(l, f)?;
        Some(lp::get(l, lp::next(l, o)?))
    }
}

/// Visits every field/value pair (listpack order, or the dict's bucket order).
pub fn for_each(ks: &Keyspace, e: Ref, mut f: impl FnMut(Val, Val)) {
    let v = ks.value(e);
    if is_ht(v) {
        let d = read_dict(v);
        let a = &ks.arena;
        let mut c = 0;
        loop {
            c = d.scan(a, c, |x| {
                f(Val::Str(fe_field(a, x)), Val::Str(fe_value(a, x)))
            });
            if c == 0 {
                break;
            }
        }
    } else {
        let l = inline_lp(v);
        let mut p = lp::first(l);
        while let Some(o) = p {
            let Some(vo) = lp::next(l, o) else { break };
            f(lp::get(l, o), lp::get(l, vo));
            p = lp::next(l, vo);
        }
    }
}

/// Creates an empty listpack hash (the caller sets fields right after).
pub fn create(ks: &mut Keyspace, db: usize, key: &[u8]) -> Ref {
    let mut v = vec![0u8];
    v.extend_from_slice(&lp::empty());
    ks.set_value(db, key, Kind::Hash, ENC_LISTPACK, &v, Ttl::Clear)
}

/// Converts a listpack hash to a hashtable.
fn to_ht(ks: &mut Keyspace, db: usize, e: Ref) -> Ref {
    let mut pairs = vec![];
    for_each(ks, e, |f, v| pairs.push((f.to_vec(), v.to_vec())));
    let mut d = DictHeader::new(FIELD_OFF as u32);
    for (f, v) in &pairs {
        dict_set(&mut ks.arena, &mut d, f, v);
    }
    let e = ks.resize_value(db, e, HT_BYTES);
    ks.value_mut(e).copy_from_slice(&ht_value(&d));
    set_enc(ks, e, ENC_HT);
    e
}

fn set_enc(ks: &mut Keyspace, e: Ref, enc: u8) {
    // The encoding byte is the entry's; strings use set_str_enc, collections this.
    ks.set_enc_byte(e, enc);
}

/// Converts to a hashtable first if setting these lengths would cross Redis's thresholds
/// (hashTypeTryConversion: any field or value longer than hash-max-listpack-value).
pub fn try_convert_for(ks: &mut Keyspace, db: usize, e: Ref, lens: &[usize], lim: Limits) -> Ref {
    if is_ht(ks.value(e)) {
        return e;
    }
    if lens.iter().any(|&l| l as u64 > lim.max_value) {
        return to_ht(ks, db, e);
    }
    e
}

/// Sets a field. Returns (entry, created).
pub fn set(ks: &mut Keyspace, db: usize, e: Ref, f: &[u8], val: &[u8], lim: Limits) -> (Ref, bool) {
    let e = try_convert_for(ks, db, e, &[f.len(), val.len()], lim);
    let v = ks.value(e);
    if is_ht(v) {
        let mut d = read_dict(v);
        let created = dict_set(&mut ks.arena, &mut d, f, val);
        write_dict(ks.value_mut(e), &d);
        return (e, created);
    }
    if lp_find(inline_lp(v), f).is_none() {
        // A new field: append in place (no copy of the listpack).
        let t = lp::total(inline_lp(v));
        let (ef, ev) = (lp::entry_len(f), lp::entry_len(val));
        let e = ks.resize_value(db, e, 1 + t + ef + ev);
        let buf = &mut ks.value_mut(e)[1..];
        lp::insert_in_place(buf, t - 1, f);
        lp::insert_in_place(buf, t - 1 + ef, val);
        if (lp::count(inline_lp(ks.value(e))) / 2) as u64 > lim.max_entries {
            return (to_ht(ks, db, e), true);
        }
        return (e, true);
    }
    let mut l = inline_lp(v).to_vec();
    let created = match lp_find(&l, f) {
        Some(o) => {
            let vo = lp::next(&l, o).unwrap_or(o);
            let n = lp::delete_in_place(&mut l, vo);
            l.truncate(l.len() - n);
            lp::push_vec(&mut l, vo, val);
            false
        }
        None => {
            let end = l.len() - 1;
            lp::push_vec(&mut l, end, f);
            let end = l.len() - 1;
            lp::push_vec(&mut l, end, val);
            true
        }
    };
    let e = ks.resize_value(db, e, 1 + l.len());
    ks.value_mut(e)[1..].copy_from_slice(&l);
    if created && (lp::count(&l) / 2) as u64 > lim.max_entries {
        return (to_ht(ks, db, e), true);
    }
    (e, created)
}

/// Deletes a field. Returns (entry, deleted). The caller deletes an emptied key.
pub fn del(ks: &mut Keyspace, db: usize, e: Ref, f: &[u8]) -> (Ref, bool) {
    let v = ks.value(e);
    if is_ht(v) {
        let mut d = read_dict(v);
        let h = ks.arena.hash(f);
        let Some(x) = d.find(&ks.arena, f, h) else {
            return (e, false);
        };
        d.unlink(&mut ks.arena, x, h);
        fe_free(&mut ks.arena, x);
        d.shrink_if_sparse(&mut ks.arena);
        write_dict(ks.value_mut(e), &d);
        return (e, true);
    }
    let mut l = inline_lp(v).to_vec();
    let Some(o) = lp_find(&l, f) else {
        return (e, false);
    };
    let n1 = lp::delete_in_place(&mut l, o);
    let n2 = lp::delete_in_place(&mut l, o);
    l.truncate(l.len() - n1 - n2);
    let e = ks.resize_value(db, e, 1 + l.len());
    ks.value_mut(e)[1..].copy_from_slice(&l);
    (e, true)
}

/// Creates a hash from pairs (RESTORE), choosing the encoding by the thresholds.
pub fn create_from(
    ks: &mut Keyspace,
    db: usize,
    key: &[u8],
    pairs: &[(Vec<u8>, Vec<u8>)],
    ttl: Ttl,
    lim: Limits,
) -> Ref {
    let mut v = vec![0u8];
    v.extend_from_slice(&lp::empty());
    let mut e = ks.set_value(db, key, Kind::Hash, ENC_LISTPACK, &v, ttl);
    if pairs.len() as u64 > lim.max_entries {
        e = to_ht(ks, db, e);
    }
    for (f, val) in pairs {
        e = set(ks, db, e, f, val, lim).0;
    }
    e
}

/// Owned field/value pairs.
pub type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

/// One HSCAN step: (next cursor, pairs). Listpack hashes return everything at once.
pub fn scan(ks: &Keyspace, e: Ref, cursor: u64, count: u64) -> (u64, Pairs) {
    let v = ks.value(e);
    let mut out = vec![];
    if !is_ht(v) {
        for_each(ks, e, |f, v| out.push((f.to_vec(), v.to_vec())));
        return (0, out);
    }
    let d = read_dict(v);
    let a = &ks.arena;
    let mut c = cursor;
    // Redis's maxiterations: at most count*10 buckets per call.
    let mut iters = count.saturating_mul(10).max(1);
    loop {
        c = d.scan(a, c, |x| {
            out.push((fe_field(a, x).to_vec(), fe_value(a, x).to_vec()))
        });
        iters -= 1;
        if c == 0 || iters == 0 || out.len() as u64 >= count {
            break;
        }
    }
    (c, out)
}

/// A uniformly random pair.
pub fn random(ks: &mut Keyspace, e: Ref) -> Option<(Vec<u8>, Vec<u8>)> {
    let v = ks.value(e);
    if is_ht(v) {
        let d = read_dict(v);
        let x = d.random(&ks.arena, &mut ks.rng)?;
        return Some((
            fe_field(&ks.arena, x).to_vec(),
            fe_value(&ks.arena, x).to_vec(),
        ));
    }
    let n = lp::count(inline_lp(v)) / 2;
    if n == 0 {
        return None;
    }
    let i = ks.rng.below(n as u64) as i64;
    let l = inline_lp(ks.value(e));
    let o = lp::seek(l, 2 * i)?;
    let vo = lp::next(l, o)?;
    Some((lp::get(l, o).to_vec(), lp::get(l, vo).to_vec()))
}

/// The hash's listpack bytes when it is stored as one (None: a hashtable), for writers
/// of formats that keep the encoding (DUMP, RDB).
pub fn listpack(ks: &Keyspace, e: Ref) -> Option<&[u8]> {
    let v = ks.value(e);
    (!is_ht(v)).then(|| inline_lp(v))
}

// ---- image validation ----------------------------------------------------------------------

/// Checks a hash value restored from a snapshot image (`live`: a key's value; otherwise
/// the header a value-graveyard node keeps of a detached table being freed). `at`: where
/// the value lies.
pub fn validate(
    a: &Arena,
    claims: &mut Claims,
    v: &[u8],
    live: bool,
    at: u64,
) -> Result<(), Corrupt> {
    if !is_ht(v) {
        if live && inline_is_valid(v) {
            return Ok(());
        }
        return Err(Corrupt::new(
            "hash value is neither a valid listpack nor a table",
            at,
        ));
    }
    super::check_header_len(v, live, HT_BYTES, "hash table header", at)?;
    let usage = DictUse::of(live);
    read_dict(v).validate(a, claims, FIELD_OFF as u32, usage, at, |a, claims, e| {
        claims.peek(e, FIELD_OFF as u64, "hash field")?;
        let size = FIELD_OFF as u64 + a.read_u32(e, 4) as u64 + a.read_u32(e, 8) as u64;
        claims.claim(e, size, "hash field")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listpack_to_hashtable_and_back_to_nothing() {
        let mut k = crate::collections::new_keyspace(Arena::new(1 << 30, [3, 4]).unwrap(), 1);
        let used0 = k.arena.used_bytes();
        let lim = Limits {
            max_entries: 128,
            max_value: 64,
        };
        let mut e = create(&mut k, 0, b"h");
        for i in 0..128 {
            e = set(
                &mut k,
                0,
                e,
                format!("f{i}").as_bytes(),
                format!("{i}").as_bytes(),
                lim,
            )
            .0;
        }
        assert!(!is_ht(k.value(e)));
        let (ne, created) = set(&mut k, 0, e, b"f5", b"five", lim);
        e = ne;
        assert!(!created);
        assert_eq!(get(&k, e, b"f5").unwrap().to_vec(), b"five");
        e = set(&mut k, 0, e, b"new", b"x", lim).0;
        assert!(is_ht(k.value(e)));
        assert_eq!(k.enc(e), ENC_HT);
        assert_eq!(len(&k, e), 129);
        assert_eq!(get(&k, e, b"f7").unwrap().to_vec(), b"7");
        for i in 0..2000 {
            e = set(&mut k, 0, e, format!("g{i}").as_bytes(), b"v", lim).0;
        }
        let c = k.clone_entry_to(e, 0, b"copy", Ttl::Keep);
        assert_eq!(len(&k, c), 2129);
        let e = k.find_raw(0, b"h").unwrap();
        let (e, d) = del(&mut k, 0, e, b"f7");
        assert!(d && get(&k, e, b"f7").is_none());
        k.delete(0, b"h", 0);
        k.delete(0, b"copy", 0);
        while k.lazyfree_step(100) {}
        assert!(k.arena.used_bytes() - used0 <= 64);
        // A long value converts immediately.
        let e = create(&mut k, 0, b"h2");
        let (e, _) = set(&mut k, 0, e, b"f", &[b'x'; 65], lim);
        assert!(is_ht(k.value(e)));
    }
}
