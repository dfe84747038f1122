//! List storage in the arena.
//!
//! Entry value byte 0 is a tag:
//! * `0` — inline: a Redis listpack follows (lists up to [`NODE_LIMIT`] bytes).
//! * `1` — quicklist: `[1][pad 3][head Ref][tail Ref][nodes u32][count u64]` (24 bytes);
//!   nodes are arena blocks `[prev Ref][next Ref][cap u32][pad u32][listpack]` of at most
//!   [`NODE_LIMIT`] bytes of listpack each (one bigger element gets a node of its own), so
//!   push and pop at either end are O(1) and touch one node.
//!
//! Both report Redis 7.0's encoding "quicklist" (7.0 has no listpack-encoded lists); the
//! inline form just saves the node indirection for small lists. A list never converts back
//! from quicklist to inline (Redis 7.0 keeps quicklists too).

use super::listpack::{self as lp, Val};
use crate::arena::validate::{Claims, Corrupt};
use crate::arena::{Arena, Ref, NULL};
use crate::keyspace::{Keyspace, Kind, Ttl};

/// Redis's OBJ_ENCODING_QUICKLIST (the entry's encoding byte).
pub const ENC_QUICKLIST: u8 = 9;
/// `list-max-listpack-size -2` (the default): 8 KiB of listpack per node. Also Redis's
/// SIZE_SAFETY_LIMIT for count-based fills.
pub const NODE_LIMIT: usize = 8192;

/// How full a node (or an inline list) may get: Redis's `list-max-listpack-size` ("fill").
/// Negative: a byte limit of 4/8/16/32/64 KiB for -1..-5; positive: at most that many
/// elements (and still at most 8 KiB). A single element always fits an empty node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fill {
    pub bytes: usize,
    pub count: usize,
}

impl Fill {
    pub const DEFAULT: Fill = Fill {
        bytes: NODE_LIMIT,
        count: usize::MAX,
    };
    pub fn from_value(v: i64) -> Fill {
        if v < 0 {
            const LEVELS: [usize; 5] = [4096, 8192, 16384, 32768, 65536];
            let i = (v.unsigned_abs() as usize - 1).min(LEVELS.len() - 1);
            Fill {
                bytes: LEVELS[i],
                count: usize::MAX,
            }
        } else {
            Fill {
                bytes: NODE_LIMIT,
                count: (v as u64).min(u32::MAX as u64) as usize,
            }
        }
    }
    pub fn from_config(c: &crate::config::Config) -> Fill {
        Fill::from_value(c.settings().list_max_listpack_size)
    }
    /// May a listpack of `bytes` holding `count` elements be kept as one node?
    fn allows(self, bytes: usize, count: usize) -> bool {
        count <= 1 || (bytes <= self.bytes && count <= self.count)
    }
    /// May an element of `elem_len` bytes be pushed into a node whose listpack has
    /// `lp_bytes` and `count` elements? Redis's _quicklistNodeAllowInsert: it estimates
    /// the growth as the raw length plus 8 bytes, so pushes split nodes where Redis does.
    fn allows_push(self, lp_bytes: usize, count: usize, elem_len: usize) -> bool {
        let est = lp_bytes + elem_len + 8;
        if count == 0 {
            true
        } else if self.count == usize::MAX {
            est <= self.bytes
        } else {
            est <= NODE_LIMIT && count < self.count
        }
    }
}
const TAG_QL: u8 = 1;
pub const QL_BYTES: usize = 24;
const NODE_HDR: usize = 16;

#[derive(Clone, Copy, Debug, Default)]
pub struct Ql {
    pub head: Ref,
    pub tail: Ref,
    pub nodes: u32,
    pub count: u64,
}

pub fn is_quicklist(v: &[u8]) -> bool {
    v.first() == Some(&TAG_QL)
}
fn ql_read(v: &[u8]) -> Ql {
    let u = |o: usize| u32::from_le_bytes([v[o], v[o + 1], v[o + 2], v[o + 3]]);
    let mut c = [0u8; 8];
    c.copy_from_slice(&v[16..24]);
    Ql {
        head: u(4),
        tail: u(8),
        nodes: u(12),
        count: u64::from_le_bytes(c),
    }
}
fn ql_bytes_of(q: &Ql) -> [u8; QL_BYTES] {
    let mut b = [0u8; QL_BYTES];
    b[0] = TAG_QL;
    b[4..8].copy_from_slice(&q.head.to_le_bytes());
    b[8..12].copy_from_slice(&q.tail.to_le_bytes());
    b[12..16].copy_from_slice(&q.nodes.to_le_bytes());
    b[16..24].copy_from_slice(&q.count.to_le_bytes());
    b
}
pub fn ql_nodes(v: &[u8]) -> u32 {
    ql_read(v).nodes
}

// ---- nodes -------------------------------------------------------------------------------

fn prev_of(a: &Arena, n: Ref) -> Ref {
    a.read_u32(n, 0)
}
fn next_of(a: &Arena, n: Ref) -> Ref {
    a.read_u32(n, 4)
}
fn cap_of(a: &Arena, n: Ref) -> usize {
    a.read_u32(n, 8) as usize
}
fn node_lp(a: &Arena, n: Ref) -> &[u8] {
    let t = lp::total(a.bytes(n, NODE_HDR, 4));
    a.bytes(n, NODE_HDR, t)
}
fn node_alloc_bytes(cap: usize) -> usize {
    NODE_HDR + cap
}
/// A new unlinked node holding `l`, with room to grow to the size class's end.
fn node_new(a: &mut Arena, l: &[u8]) -> Ref {
    let cap = crate::arena::size_class(NODE_HDR + l.len()).1 - NODE_HDR;
    let n = a.alloc(node_alloc_bytes(cap));
    a.write_u32(n, 0, NULL);
    a.write_u32(n, 4, NULL);
    a.write_u32(n, 8, cap as u32);
    a.write_u32(n, 12, 0);
    a.bytes_mut(n, NODE_HDR, l.len()).copy_from_slice(l);
    n
}
fn node_free(a: &mut Arena, n: Ref) {
    let cap = cap_of(a, n);
    a.free(n, node_alloc_bytes(cap));
}
/// Links `n` after `after` (NULL: at the head).
fn link_after(a: &mut Arena, q: &mut Ql, after: Ref, n: Ref) {
    let next = if after == NULL {
        q.head
    } else {
        next_of(a, after)
    };
    a.write_u32(n, 0, after);
    a.write_u32(n, 4, next);
    if after == NULL {
        q.head = n;
    } else {
        a.write_u32(after, 4, n);
    }
    if next == NULL {
        q.tail = n;
    } else {
        a.write_u32(next, 0, n);
    }
    q.nodes += 1;
}
fn unlink(a: &mut Arena, q: &mut Ql, n: Ref) {
    let (p, nx) = (prev_of(a, n), next_of(a, n));
    if p == NULL {
        q.head = nx;
    } else {
        a.write_u32(p, 4, nx);
    }
    if nx == NULL {
        q.tail = p;
    } else {
        a.write_u32(nx, 0, p);
    }
    q.nodes -= 1;
}
/// Replaces node `n`'s listpack with `l`, moving the node if it needs more room.
fn node_set(a: &mut Arena, q: &mut Ql, n: Ref, l: &[u8]) -> Ref {
    if l.len() <= cap_of(a, n) {
        a.bytes_mut(n, NODE_HDR, l.len()).copy_from_slice(l);
        return n;
    }
    let m = node_new(a, l);
    let p = prev_of(a, n);
    unlink(a, q, n);
    node_free(a, n);
    link_after(a, q, p, m);
    m
}
/// Makes room for `need` bytes of listpack in node `n` (moving it if needed).
fn node_reserve(a: &mut Arena, q: &mut Ql, n: Ref, need: usize) -> Ref {
    if need <= cap_of(a, n) {
        return n;
    }
    let cap = crate::arena::size_class(NODE_HDR + need).1 - NODE_HDR;
    let m = a.alloc(node_alloc_bytes(cap));
    let t = lp::total(a.bytes(n, NODE_HDR, 4));
    a.copy_within(n, 0, m, 0, NODE_HDR + t);
    a.write_u32(m, 8, cap as u32);
    let (p, nx) = (prev_of(a, n), next_of(a, n));
    if p == NULL {
        q.head = m;
    } else {
        a.write_u32(p, 4, m);
    }
    if nx == NULL {
        q.tail = m;
    } else {
        a.write_u32(nx, 0, m);
    }
    node_free(a, n);
    m
}

/// Splits elements into listpacks of at most NODE_LIMIT bytes (a bigger element alone).
fn split<'a>(elems: impl IntoIterator<Item = &'a [u8]>, fill: Fill) -> Vec<Vec<u8>> {
    let mut out = vec![];
    let mut cur = lp::empty();
    for e in elems {
        let n = lp::count(&cur);
        if n > 0 && !fill.allows(cur.len() + lp::entry_len(e), n + 1) {
            out.push(std::mem::replace(&mut cur, lp::empty()));
        }
        let end = cur.len() - 1;
        lp::push_vec(&mut cur, end, e);
    }
    if lp::count(&cur) > 0 {
        out.push(cur);
    }
    out
}

pub fn ql_free_all(a: &mut Arena, v: &[u8]) {
    let mut n = ql_read(v).head;
    while n != NULL {
        let nx = next_of(a, n);
        node_free(a, n);
        n = nx;
    }
}

/// Frees up to `budget` nodes from the head of a detached quicklist whose header is in
/// `hdr` (updated). Returns (nodes freed, finished).
pub fn ql_free_some(a: &mut Arena, hdr: &mut [u8], budget: usize) -> (u64, bool) {
    let mut q = ql_read(hdr);
    let mut freed = 0;
    while q.head != NULL && freed < budget.max(1) {
        let nx = next_of(a, q.head);
        node_free(a, q.head);
        q.head = nx;
        q.nodes = q.nodes.saturating_sub(1);
        freed += 1;
    }
    hdr[..QL_BYTES].copy_from_slice(&ql_bytes_of(&q));
    (freed as u64, q.head == NULL)
}

pub fn ql_bytes(a: &Arena, v: &[u8]) -> u64 {
    let mut n = ql_read(v).head;
    let mut sum = 0u64;
    while n != NULL {
        sum += crate::arena::size_class(node_alloc_bytes(cap_of(a, n))).1 as u64;
        n = next_of(a, n);
    }
    sum
}

pub fn ql_clone(a: &mut Arena, v: &[u8]) -> Vec<u8> {
    let src = ql_read(v);
    let mut q = Ql {
        count: src.count,
        ..Ql::default()
    };
    let mut n = src.head;
    while n != NULL {
        let l = node_lp(a, n).to_vec();
        let m = node_new(a, &l);
        let tail = q.tail;
        link_after(a, &mut q, tail, m);
        n = next_of(a, n);
    }
    ql_bytes_of(&q).to_vec()
}

// ---- keyspace-level operations ------------------------------------------------------------

/// The listpack of an inline list.
/// An inline (listpack) list value, well formed.
pub fn inline_is_valid(v: &[u8]) -> bool {
    !is_quicklist(v) && v.first() == Some(&0) && lp::validate(inline_lp(v), false)
}

fn inline_lp(v: &[u8]) -> &[u8] {
    &v[1..]
}

pub fn len(ks: &Keyspace, e: Ref) -> u64 {
    let v = ks.value(e);
    if is_quicklist(v) {
        ql_read(v).count
    } else {
        lp::count(inline_lp(v)) as u64
    }
}

/// Creates an empty inline list at `key` (the caller pushes right after).
pub fn create(ks: &mut Keyspace, db: usize, key: &[u8]) -> Ref {
    let mut v = vec![0u8];
    v.extend_from_slice(&lp::empty());
    ks.set_value(db, key, Kind::List, ENC_QUICKLIST, &v, Ttl::Clear)
}

/// Creates a list from validated, non-empty listpacks (RESTORE), with the given TTL: a
/// single small one stays inline, otherwise each becomes a node as it is.
pub fn create_from(ks: &mut Keyspace, db: usize, key: &[u8], lps: &[Vec<u8>], ttl: Ttl) -> Ref {
    if lps.len() == 1 && lps[0].len() <= NODE_LIMIT {
        let mut v = vec![0u8];
        v.extend_from_slice(&lps[0]);
        return ks.set_value(db, key, Kind::List, ENC_QUICKLIST, &v, ttl);
    }
    let mut q = Ql::default();
    for l in lps {
        let m = node_new(&mut ks.arena, l);
        let tail = q.tail;
        link_after(&mut ks.arena, &mut q, tail, m);
        q.count += lp::count(l) as u64;
    }
    ks.set_value(db, key, Kind::List, ENC_QUICKLIST, &ql_bytes_of(&q), ttl)
}

/// Converts an inline list to a quicklist.
fn to_quicklist(ks: &mut Keyspace, db: usize, e: Ref, fill: Fill) -> Ref {
    let elems: Vec<Vec<u8>> = lp::iter(inline_lp(ks.value(e)))
        .map(|x| x.to_vec())
        .collect();
    let mut q = Ql::default();
    for l in split(elems.iter().map(|x| x.as_slice()), fill) {
        let m = node_new(&mut ks.arena, &l);
        let tail = q.tail;
        link_after(&mut ks.arena, &mut q, tail, m);
    }
    q.count = elems.len() as u64;
    let e = ks.resize_value(db, e, QL_BYTES);
    ks.value_mut(e).copy_from_slice(&ql_bytes_of(&q));
    e
}

/// Pushes one element at the head or tail. Returns the (possibly moved) entry.
pub fn push(ks: &mut Keyspace, db: usize, e: Ref, s: &[u8], head: bool, fill: Fill) -> Ref {
    let mut e = e;
    if !is_quicklist(ks.value(e)) {
        let t = lp::total(inline_lp(ks.value(e)));
        let need = t + lp::entry_len(s);
        if fill.allows_push(t, lp::count(inline_lp(ks.value(e))), s.len()) {
            e = ks.resize_value(db, e, 1 + need);
            let buf = &mut ks.value_mut(e)[1..];
            let off = if head { lp::HEADER } else { t - 1 };
            lp::insert_in_place(buf, off, s);
            return e;
        }
        e = to_quicklist(ks, db, e, fill);
    }
    let mut q = ql_read(ks.value(e));
    let a = &mut ks.arena;
    let n = if head { q.head } else { q.tail };
    let t = if n == NULL {
        0
    } else {
        lp::total(a.bytes(n, NODE_HDR, 4))
    };
    let need = t + lp::entry_len(s);
    if n != NULL && fill.allows_push(t, lp::count(node_lp(a, n)), s.len()) {
        let n = node_reserve(a, &mut q, n, need);
        let buf = a.bytes_mut(n, NODE_HDR, need);
        let off = if head { lp::HEADER } else { t - 1 };
        lp::insert_in_place(buf, off, s);
    } else {
        let m = node_new(a, &lp::build([s]));
        let after = if head { NULL } else { q.tail };
        link_after(a, &mut q, after, m);
    }
    q.count += 1;
    ks.value_mut(e).copy_from_slice(&ql_bytes_of(&q));
    e
}

/// Pops one element from the head or tail (the list must not be empty). The caller
/// deletes the key when the list becomes empty.
pub fn pop(ks: &mut Keyspace, db: usize, e: Ref, head: bool) -> (Ref, Vec<u8>) {
    let v = ks.value(e);
    if !is_quicklist(v) {
        let l = inline_lp(v);
        let off = if head { lp::first(l) } else { lp::last(l) };
        let Some(off) = off else {
            return (e, vec![]);
        };
        let val = lp::get(l, off).to_vec();
        let vl = v.len();
        let shrink = lp::delete_in_place(&mut ks.value_mut(e)[1..], off);
        let e = ks.resize_value(db, e, vl - shrink);
        return (e, val);
    }
    let mut q = ql_read(v);
    let a = &mut ks.arena;
    let n = if head { q.head } else { q.tail };
    let l = node_lp(a, n);
    let off = if head { lp::first(l) } else { lp::last(l) };
    let Some(off) = off else {
        return (e, vec![]);
    };
    let val = lp::get(l, off).to_vec();
    let t = l.len();
    let buf = a.bytes_mut(n, NODE_HDR, t);
    lp::delete_in_place(buf, off);
    if lp::count(node_lp(a, n)) == 0 {
        unlink(a, &mut q, n);
        node_free(a, n);
    }
    q.count -= 1;
    ks.value_mut(e).copy_from_slice(&ql_bytes_of(&q));
    (e, val)
}

/// Removes `k` elements from the head or tail (LTRIM), whole nodes at a time where
/// possible. The caller deletes the key when the list becomes empty.
pub fn drop_end(ks: &mut Keyspace, db: usize, e: Ref, head: bool, k: u64) -> Ref {
    let mut e = e;
    let mut k = k;
    if !is_quicklist(ks.value(e)) {
        let all: Vec<Vec<u8>> = lp::iter(inline_lp(ks.value(e)))
            .map(|x| x.to_vec())
            .collect();
        let k = (k as usize).min(all.len());
        let keep = if head {
            &all[k..]
        } else {
            &all[..all.len() - k]
        };
        let mut v = vec![0u8];
        v.extend_from_slice(&lp::build(keep.iter().map(|x| x.as_slice())));
        e = ks.resize_value(db, e, v.len());
        ks.value_mut(e).copy_from_slice(&v);
        return e;
    }
    while k > 0 {
        let q = ql_read(ks.value(e));
        let n = if head { q.head } else { q.tail };
        if n == NULL {
            break;
        }
        let c = lp::count(node_lp(&ks.arena, n)) as u64;
        if c <= k {
            let mut q = q;
            unlink(&mut ks.arena, &mut q, n);
            node_free(&mut ks.arena, n);
            q.count -= c;
            ks.value_mut(e).copy_from_slice(&ql_bytes_of(&q));
            k -= c;
        } else {
            e = pop(ks, db, e, head).0;
            k -= 1;
        }
    }
    e
}

/// A segment of a list: the inline listpack (None) or one quicklist node.
pub type Seg = Option<Ref>;

/// The segments of a list in order (one for inline lists).
pub fn segments(ks: &Keyspace, e: Ref) -> Vec<Seg> {
    let v = ks.value(e);
    if !is_quicklist(v) {
        return vec![None];
    }
    let mut out = vec![];
    let mut n = ql_read(v).head;
    while n != NULL {
        out.push(Some(n));
        n = next_of(&ks.arena, n);
    }
    out
}

/// The listpack bytes of a segment.
pub fn seg_lp(ks: &Keyspace, e: Ref, s: Seg) -> &[u8] {
    match s {
        None => inline_lp(ks.value(e)),
        Some(n) => node_lp(&ks.arena, n),
    }
}

/// Replaces a segment's elements (LSET, LINSERT, LREM). A segment that grows past the
/// limit splits; an empty node is unlinked. Returns the (possibly moved) entry.
pub fn set_segment(
    ks: &mut Keyspace,
    db: usize,
    e: Ref,
    s: Seg,
    elems: &[Vec<u8>],
    fill: Fill,
) -> Ref {
    match s {
        None => {
            let l = lp::build(elems.iter().map(|x| x.as_slice()));
            if fill.allows(l.len(), elems.len()) {
                let e = ks.resize_value(db, e, 1 + l.len());
                let v = ks.value_mut(e);
                v[0] = 0;
                v[1..].copy_from_slice(&l);
                e
            } else {
                let e = set_segment(ks, db, e, None, &[], fill);
                let e = to_quicklist(ks, db, e, fill);
                let mut q = ql_read(ks.value(e));
                for l in split(elems.iter().map(|x| x.as_slice()), fill) {
                    let m = node_new(&mut ks.arena, &l);
                    let tail = q.tail;
                    link_after(&mut ks.arena, &mut q, tail, m);
                }
                q.count = elems.len() as u64;
                ks.value_mut(e).copy_from_slice(&ql_bytes_of(&q));
                e
            }
        }
        Some(n) => {
            let mut q = ql_read(ks.value(e));
            let a = &mut ks.arena;
            let old = lp::count(node_lp(a, n)) as u64;
            let parts = split(elems.iter().map(|x| x.as_slice()), fill);
            if parts.is_empty() {
                unlink(a, &mut q, n);
                node_free(a, n);
            } else {
                let mut at = node_set(a, &mut q, n, &parts[0]);
                for p in &parts[1..] {
                    let m = node_new(a, p);
                    link_after(a, &mut q, at, m);
                    at = m;
                }
            }
            q.count = q.count - old + elems.len() as u64;
            ks.value_mut(e).copy_from_slice(&ql_bytes_of(&q));
            e
        }
    }
}

/// The segment holding element `idx` and the index of its first element, found from the
/// nearer end of the list by following the node links (as Redis's quicklist iterator
/// does): O(nodes walked), never a pass over the whole list for an index near either end.
fn find_seg(ks: &Keyspace, e: Ref, idx: u64) -> Option<(Seg, u64)> {
    let v = ks.value(e);
    if !is_quicklist(v) {
        let c = lp::count(inline_lp(v)) as u64;
        return (idx < c).then_some((None, 0));
    }
    let q = ql_read(v);
    if idx >= q.count {
        return None;
    }
    let a = &ks.arena;
    if idx < q.count / 2 {
        let (mut base, mut n) = (0u64, q.head);
        while n != NULL {
            let c = lp::count(node_lp(a, n)) as u64;
            if idx < base + c {
                return Some((Some(n), base));
            }
            base += c;
            n = next_of(a, n);
        }
    } else {
        let (mut end, mut n) = (q.count, q.tail);
        while n != NULL {
            let c = lp::count(node_lp(a, n)) as u64;
            if idx + c >= end {
                return Some((Some(n), end - c));
            }
            end -= c;
            n = prev_of(a, n);
        }
    }
    None
}

/// Visits elements from index `start` (0-based from the head) towards the tail, or towards
/// the head when `reverse`; `f` returns false to stop.
pub fn walk(ks: &Keyspace, e: Ref, start: u64, reverse: bool, mut f: impl FnMut(Val) -> bool) {
    let Some((mut seg, base)) = find_seg(ks, e, start) else {
        return;
    };
    let mut off = lp::seek(seg_lp(ks, e, seg), (start - base) as i64);
    loop {
        let l = seg_lp(ks, e, seg);
        while let Some(o) = off {
            if !f(lp::get(l, o)) {
                return;
            }
            off = if reverse {
                lp::prev(l, o)
            } else {
                lp::next(l, o)
            };
        }
        let Some(n) = seg else {
            return; // an inline list is one segment
        };
        let n = if reverse {
            prev_of(&ks.arena, n)
        } else {
            next_of(&ks.arena, n)
        };
        if n == NULL {
            return;
        }
        seg = Some(n);
        let l = seg_lp(ks, e, seg);
        off = if reverse { lp::last(l) } else { lp::first(l) };
    }
}

/// The segment holding element `idx` and the element's index inside it.
pub fn locate(ks: &Keyspace, e: Ref, idx: u64) -> Option<(Seg, usize)> {
    find_seg(ks, e, idx).map(|(s, base)| (s, (idx - base) as usize))
}

/// Elements of a segment as owned bytes.
pub fn seg_elems(ks: &Keyspace, e: Ref, s: Seg) -> Vec<Vec<u8>> {
    lp::iter(seg_lp(ks, e, s)).map(|x| x.to_vec()).collect()
}

// ---- image validation ----------------------------------------------------------------------

/// Checks a list value restored from a snapshot image before anything walks it (`at`:
/// where the value lies, for errors). `live`: a key's value, whose header, links and
/// counts must all agree; otherwise the header a value-graveyard node keeps of a detached
/// quicklist being freed from its head (only its nodes' memory is checked).
pub fn validate(
    a: &Arena,
    claims: &mut Claims,
    v: &[u8],
    live: bool,
    at: u64,
) -> Result<(), Corrupt> {
    let bad = |what: String| Err(Corrupt::new(what, at));
    if !is_quicklist(v) {
        if live && inline_is_valid(v) {
            return Ok(());
        }
        return bad("list value is neither a valid listpack nor a quicklist".into());
    }
    if (live && v.len() != QL_BYTES) || v.len() < QL_BYTES {
        return bad(format!("quicklist header of {} bytes", v.len()));
    }
    let q = ql_read(v);
    let (mut n, mut prev, mut nodes, mut count) = (q.head, NULL, 0u64, 0u64);
    while n != NULL {
        nodes += 1;
        if live && nodes > q.nodes as u64 {
            return bad(format!(
                "quicklist has more nodes than its count ({})",
                q.nodes
            ));
        }
        claims.peek(n, NODE_HDR as u64, "quicklist node")?;
        let cap = cap_of(a, n);
        claims.claim(n, node_alloc_bytes(cap) as u64, "quicklist node")?;
        if live {
            if prev_of(a, n) != prev {
                return Err(Corrupt::at("quicklist node's back link", n));
            }
            if cap < lp::HEADER + 1 || lp::total(a.bytes(n, NODE_HDR, 4)) > cap {
                return Err(Corrupt::at("quicklist node's listpack exceeds its node", n));
            }
            let l = node_lp(a, n);
            if !lp::validate(l, false) {
                return Err(Corrupt::at("quicklist node's listpack is invalid", n));
            }
            count += lp::count(l) as u64;
        }
        prev = n;
        n = next_of(a, n);
    }
    if live && (q.tail != prev || nodes != q.nodes as u64 || count != q.count) {
        return bad(format!(
            "quicklist header (tail, {} nodes, {} elements) disagrees with its {nodes} nodes of {count} elements",
            q.nodes, q.count
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ks() -> Keyspace {
        crate::collections::new_keyspace(Arena::new(1 << 30, [1, 2]).unwrap(), 2)
    }
    fn all(k: &Keyspace, e: Ref) -> Vec<Vec<u8>> {
        let mut v = vec![];
        walk(k, e, 0, false, |x| {
            v.push(x.to_vec());
            true
        });
        v
    }

    #[test]
    fn push_pop_convert_and_free() {
        let mut k = ks();
        let used0 = k.arena.used_bytes();
        let mut e = create(&mut k, 0, b"l");
        let mut model = std::collections::VecDeque::new();
        for i in 0..20_000u32 {
            let s = format!("element-{i}");
            let head = i % 3 == 0;
            e = push(&mut k, 0, e, s.as_bytes(), head, Fill::DEFAULT);
            if head {
                model.push_front(s.into_bytes());
            } else {
                model.push_back(s.into_bytes());
            }
        }
        assert!(is_quicklist(k.value(e)));
        assert_eq!(len(&k, e), 20_000);
        assert_eq!(all(&k, e), model.iter().cloned().collect::<Vec<_>>());
        // Reverse walk from the middle.
        let mut back = vec![];
        walk(&k, e, 9999, true, |x| {
            back.push(x.to_vec());
            true
        });
        assert_eq!(back.len(), 10_000);
        assert_eq!(back[0], model[9999]);
        for i in 0..5000 {
            let (ne, v) = pop(&mut k, 0, e, i % 2 == 0);
            e = ne;
            let m = if i % 2 == 0 {
                model.pop_front()
            } else {
                model.pop_back()
            };
            assert_eq!(Some(v), m);
        }
        e = drop_end(&mut k, 0, e, true, 3000);
        e = drop_end(&mut k, 0, e, false, 3000);
        for _ in 0..3000 {
            model.pop_front();
            model.pop_back();
        }
        assert_eq!(all(&k, e), model.iter().cloned().collect::<Vec<_>>());
        // Rewrite one segment bigger (splits).
        let (s, _) = locate(&k, e, 10).unwrap();
        let mut el = seg_elems(&k, e, s);
        let before = el.len();
        for _ in 0..2000 {
            el.insert(1, b"x".repeat(10));
        }
        e = set_segment(&mut k, 0, e, s, &el, Fill::DEFAULT);
        assert_eq!(len(&k, e) as usize, model.len() + el.len() - before);
        k.delete(0, b"l", 0);
        while k.lazyfree_step(1024) {}
        // Only the db's initial bucket array stays.
        assert!(k.arena.used_bytes() - used0 <= 64);
    }

    #[test]
    fn fills_bound_nodes() {
        assert_eq!(Fill::from_value(-2), Fill::DEFAULT);
        assert_eq!(Fill::from_value(-1).bytes, 4096);
        assert_eq!(Fill::from_value(-9).bytes, 65536);
        for (fill, max_count, max_bytes) in [
            (Fill::from_value(3), 3, NODE_LIMIT),
            (Fill::from_value(-1), usize::MAX, 4096),
        ] {
            let mut k = ks();
            let mut e = create(&mut k, 0, b"l");
            for i in 0..2000 {
                e = push(&mut k, 0, e, format!("v{i}").as_bytes(), i % 2 == 0, fill);
            }
            assert_eq!(len(&k, e), 2000);
            for s in segments(&k, e) {
                let l = seg_lp(&k, e, s);
                assert!(lp::count(l) <= max_count && l.len() <= max_bytes);
            }
        }
    }

    #[test]
    fn clone_is_deep() {
        let mut k = ks();
        let mut e = create(&mut k, 0, b"l");
        for i in 0..5000 {
            e = push(
                &mut k,
                0,
                e,
                format!("{i}-{i}").as_bytes(),
                false,
                Fill::DEFAULT,
            );
        }
        let c = k.clone_entry_to(e, 1, b"c", Ttl::Keep);
        let want = all(&k, c);
        k.delete(0, b"l", 0);
        let c = k.find_raw(1, b"c").unwrap();
        assert_eq!(all(&k, c), want);
        assert_eq!(len(&k, c), 5000);
    }
}
