//! List storage in the arena.
//!
//! Entry value byte 0 is a tag:
//! * `0` — inline: a Redis listpack follows (lists up to [`NODE_LIMIT`] bytes).
//! * `1` — quicklist: `[1][pad 3][head Ref][tail Ref][nodes u32][count u64]` (24 bytes);
//!   nodes are arena blocks `[prev Ref][next Ref][cap u32][pad u32][listpack]` of at most
//!   [`NODE_LIMIT`] bytes of listpack each (one bigger element gets a node of its own), so
//!   push and pop at either end are O(1) and touch one node.
//!
//! A node may be *cold* (SSD tiering, ARCHITECTURE.md "Tiered store", "Quicklist nodes"):
//! its block is then `[prev Ref][next Ref][cap 0][flags: cold][stub 16][count u32][listpack
//! bytes u32]`, its listpack only in the tier file, and the header's pad bytes 1..4 count
//! the list's cold nodes. Only the primitives below know cold nodes; the image validator
//! refuses them and nothing else makes one, so the list commands never meet one.
//!
//! Both report Redis 7.0's encoding "quicklist" (7.0 has no listpack-encoded lists); the
//! inline form just saves the node indirection for small lists. A list never converts back
//! from quicklist to inline (Redis 7.0 keeps quicklists too).

use super::listpack::{self as lp, Val};
use crate::arena::validate::{Claims, Corrupt};
use crate::arena::{Arena, Ref, NULL};
use crate::keyspace::tiered::{ColdStub, COLD_STUB_BYTES};
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
/// The node flags word (header bytes 12..16; 0 for a node holding its listpack): the
/// listpack is in the tier file, the block is a cold node's.
const NODE_FLAG_COLD: u32 = 1;
/// A cold node's block: the header, its record's stub, its element count and its
/// listpack's length (LLEN, the node walks by index and the read's checks need no bytes).
const COLD_NODE_BYTES: usize = NODE_HDR + COLD_STUB_BYTES + 8;
/// Cold nodes a list may count (the header's 3 pad bytes).
const MAX_COLD_NODES: u32 = (1 << 24) - 1;

#[derive(Clone, Copy, Debug, Default)]
pub struct Ql {
    pub head: Ref,
    pub tail: Ref,
    pub nodes: u32,
    pub count: u64,
    /// Cold nodes among `nodes`.
    pub cold: u32,
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
        cold: u32::from_le_bytes([v[1], v[2], v[3], 0]),
    }
}
fn ql_bytes_of(q: &Ql) -> [u8; QL_BYTES] {
    let mut b = [0u8; QL_BYTES];
    b[0] = TAG_QL;
    b[1..4].copy_from_slice(&q.cold.to_le_bytes()[..3]);
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
fn node_is_cold(a: &Arena, n: Ref) -> bool {
    a.read_u32(n, 12) & NODE_FLAG_COLD != 0
}
/// Bytes node `n`'s block was allocated with.
fn node_block_bytes(a: &Arena, n: Ref) -> usize {
    if node_is_cold(a, n) {
        COLD_NODE_BYTES
    } else {
        node_alloc_bytes(cap_of(a, n))
    }
}
fn node_free(a: &mut Arena, n: Ref) {
    let bytes = node_block_bytes(a, n);
    a.free(n, bytes);
}
/// Links `n` after `after` (NULL: at the head).
fn link_after(a: &mut Arena, q: &mut Ql, after: Ref, n: Ref) {
    let next = if after == NULL {
        q.head
    } else {
        next_of(a, after)
    };
    link_between(a, q, after, next, n);
    q.nodes += 1;
}
/// Links `n` between `p` and `nx` (NULL: the list's end on that side), which become its
/// neighbours.
fn link_between(a: &mut Arena, q: &mut Ql, p: Ref, nx: Ref, n: Ref) {
    a.write_u32(n, 0, p);
    a.write_u32(n, 4, nx);
    if p == NULL {
        q.head = n;
    } else {
        a.write_u32(p, 4, n);
    }
    if nx == NULL {
        q.tail = n;
    } else {
        a.write_u32(nx, 0, n);
    }
}
/// Puts `m` where `n` is in the list (its links, its neighbours' links, head or tail);
/// `n` is left out of the list, still allocated.
fn take_place(a: &mut Arena, q: &mut Ql, n: Ref, m: Ref) {
    let (p, nx) = (prev_of(a, n), next_of(a, n));
    link_between(a, q, p, nx, m);
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

/// Frees a node; a cold node's record place goes to `freed` (its space in the tier file
/// is freed with no I/O, as a cold value's). True if the node was cold.
fn node_release(a: &mut Arena, n: Ref, freed: &mut Vec<ColdStub>) -> bool {
    let stub = cold_node_stub(a, n);
    node_free(a, n);
    if let Some(s) = stub {
        freed.push(s);
    }
    stub.is_some()
}

/// Frees every node of a quicklist (cold nodes' record places go to `freed`).
pub fn ql_free_all(a: &mut Arena, v: &[u8], freed: &mut Vec<ColdStub>) {
    let mut n = ql_read(v).head;
    while n != NULL {
        let nx = next_of(a, n);
        node_release(a, n, freed);
        n = nx;
    }
}

// ---- cold nodes (SSD tiering) ------------------------------------------------------------

/// The record place of a cold node (None: the node holds its listpack).
fn cold_node_stub(a: &Arena, n: Ref) -> Option<ColdStub> {
    node_is_cold(a, n).then(|| ColdStub::decode(a.bytes(n, NODE_HDR, COLD_STUB_BYTES)))
}

/// Cold nodes the list's header counts (0 for an inline list).
pub fn cold_node_count(v: &[u8]) -> u32 {
    if is_quicklist(v) && v.len() >= QL_BYTES {
        ql_read(v).cold
    } else {
        0
    }
}

/// The cold nodes of a quicklist value, head first, with their record places (empty for
/// an inline list, and without a walk when the header counts none).
pub fn cold_nodes(a: &Arena, v: &[u8]) -> Vec<(Ref, ColdStub)> {
    if !is_quicklist(v) || ql_read(v).cold == 0 {
        return vec![];
    }
    let mut out = vec![];
    let mut n = ql_read(v).head;
    while n != NULL {
        if let Some(stub) = cold_node_stub(a, n) {
            out.push((n, stub));
        }
        n = next_of(a, n);
    }
    out
}

/// Replaces interior hot node `n` of the quicklist whose header is `hdr` (updated) by a
/// cold node whose listpack is at `stub` in the tier file. The caller has the node's
/// bytes written at `stub` (its value is the listpack, exactly). Refused (None, nothing
/// changed): a head or tail node (pushes and pops touch them), a node already cold, a
/// stub of another length, a list counting the most cold nodes it can. Returns the cold
/// node's block (the neighbours are relinked to it).
pub fn node_make_cold(a: &mut Arena, hdr: &mut [u8], n: Ref, stub: ColdStub) -> Option<Ref> {
    let mut q = ql_read(hdr);
    let (p, nx) = (prev_of(a, n), next_of(a, n));
    if p == NULL
        || nx == NULL
        || node_is_cold(a, n)
        || q.cold >= MAX_COLD_NODES
        || stub.value_bytes as usize != node_lp(a, n).len()
    {
        return None;
    }
    let count = lp::count(node_lp(a, n)) as u32;
    let c = a.alloc(COLD_NODE_BYTES);
    a.write_u32(c, 8, 0);
    a.write_u32(c, 12, NODE_FLAG_COLD);
    a.bytes_mut(c, NODE_HDR, COLD_STUB_BYTES)
        .copy_from_slice(&stub.encode());
    a.write_u32(c, NODE_HDR + COLD_STUB_BYTES, count);
    a.write_u32(c, NODE_HDR + COLD_STUB_BYTES + 4, stub.value_bytes);
    take_place(a, &mut q, n, c);
    node_free(a, n);
    q.cold += 1;
    hdr[..QL_BYTES].copy_from_slice(&ql_bytes_of(&q));
    Some(c)
}

/// Brings cold node `n` of the quicklist whose header is `hdr` (updated) back into RAM
/// with `l`, its listpack read from the tier file. `l` must be a well-formed listpack of
/// the length and element count the cold node recorded (a checksum says the bytes are
/// the ones written, not that the listpack code may trust them); else Err and nothing
/// changes. Returns the node's new block. The node's place in the tier file is the
/// caller's to free or keep.
pub fn node_make_warm(a: &mut Arena, hdr: &mut [u8], n: Ref, l: &[u8]) -> Result<Ref, String> {
    let Some(stub) = cold_node_stub(a, n) else {
        return Err("the list node is not cold".into());
    };
    let count = a.read_u32(n, NODE_HDR + COLD_STUB_BYTES) as usize;
    if l.len() != stub.value_bytes as usize || !lp::validate(l, false) || lp::count(l) != count {
        return Err(crate::keyspace::tiered::BAD_BLOB.into());
    }
    let mut q = ql_read(hdr);
    let m = node_new(a, l);
    take_place(a, &mut q, n, m);
    node_free(a, n);
    q.cold = q.cold.saturating_sub(1);
    hdr[..QL_BYTES].copy_from_slice(&ql_bytes_of(&q));
    Ok(m)
}

/// Frees up to `budget` nodes from the head of a detached quicklist whose header is in
/// `hdr` (updated; cold nodes' record places go to `stubs`). Returns (nodes freed,
/// finished).
pub fn ql_free_some(
    a: &mut Arena,
    hdr: &mut [u8],
    budget: usize,
    stubs: &mut Vec<ColdStub>,
) -> (u64, bool) {
    let mut q = ql_read(hdr);
    let mut freed = 0;
    while q.head != NULL && freed < budget.max(1) {
        let nx = next_of(a, q.head);
        if node_release(a, q.head, stubs) {
            q.cold = q.cold.saturating_sub(1);
        }
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
        sum += crate::arena::size_class(node_block_bytes(a, n)).1 as u64;
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
    // The list commands never meet a cold node: only the primitives above know one,
    // and the loader cannot give their records back yet.
    if q.cold != 0 {
        return bad(format!(
            "quicklist header counts {} cold nodes (tiered list nodes are not loaded)",
            q.cold
        ));
    }
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
        if node_is_cold(a, n) {
            return Err(Corrupt::at(
                "cold quicklist node (tiered list nodes are not loaded)",
                n,
            ));
        }
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

    /// A long list of distinct incompressible elements (about 7 KiB per node).
    fn long_list(k: &mut Keyspace, key: &[u8], n: usize) -> (Ref, Vec<Vec<u8>>) {
        let mut e = create(k, 0, key);
        let mut model = vec![];
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for i in 0..n {
            let mut el = format!("{i}:").into_bytes();
            for _ in 0..12 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                el.extend_from_slice(&x.to_le_bytes());
            }
            e = push(k, 0, e, &el, false, Fill::DEFAULT);
            model.push(el);
        }
        (e, model)
    }

    /// Makes every interior node of `key`'s list cold; the "tier file" is the map.
    fn cool_interior(k: &mut Keyspace, key: &[u8]) -> std::collections::HashMap<ColdStub, Vec<u8>> {
        let mut file = std::collections::HashMap::new();
        let e = k.find_raw(0, key).unwrap();
        let segs = segments(k, e);
        for (i, s) in segs.iter().enumerate() {
            let n = s.unwrap();
            let l = node_lp(&k.arena, n).to_vec();
            let stub = ColdStub {
                page: 100 + 2 * i as u32,
                offset: 0,
                record_bytes: (8 + key.len() + l.len()) as u32,
                value_bytes: l.len() as u32,
            };
            let e = k.find_raw(0, key).unwrap();
            let end = i == 0 || i + 1 == segs.len();
            // A stub of another length is refused.
            let short = ColdStub {
                value_bytes: stub.value_bytes - 1,
                ..stub
            };
            assert!(k.cool_part(e, n, short).is_none());
            match k.cool_part(e, n, stub) {
                Some(c) => {
                    assert!(!end, "an end node is never made cold");
                    assert!(k.cool_part(e, c, stub).is_none(), "already cold");
                    file.insert(stub, l);
                }
                None => assert!(end, "interior node {i} refused"),
            }
        }
        file
    }

    #[test]
    fn cold_nodes_keep_links_counts_and_bytes() {
        let mut k = ks();
        let (e, model) = long_list(&mut k, b"l", 3000);
        let nodes = segments(&k, e).len();
        assert!(nodes >= 8, "{nodes} nodes");
        let bytes_hot = ql_bytes(&k.arena, k.value(e));
        let file = cool_interior(&mut k, b"l");
        let e = k.find_raw(0, b"l").unwrap();
        assert_eq!(file.len(), nodes - 2);
        assert_eq!(k.cold_part_count(e) as usize, nodes - 2);
        assert_eq!(k.tier.cold_parts as usize, nodes - 2);
        // LLEN and the node count answer from the header, the ends stay hot.
        assert_eq!(len(&k, e), 3000);
        assert_eq!(ql_nodes(k.value(e)) as usize, nodes);
        let q = ql_read(k.value(e));
        assert!(!node_is_cold(&k.arena, q.head) && !node_is_cold(&k.arena, q.tail));
        // The cold nodes are small blocks, in order, linked both ways.
        assert!(ql_bytes(&k.arena, k.value(e)) < bytes_hot / 10);
        let cold = k.cold_parts(e);
        assert_eq!(cold.len(), nodes - 2);
        for w in cold.windows(2) {
            assert_eq!(next_of(&k.arena, w[0].0), w[1].0);
            assert_eq!(prev_of(&k.arena, w[1].0), w[0].0);
        }
        // Bytes that are not the node's are refused; the node stays cold.
        let (n, stub) = cold[0];
        let mut hdr = k.value(e).to_vec();
        let good = &file[&stub];
        let mut other = good.clone();
        other.truncate(good.len() - 1);
        assert!(node_make_warm(&mut k.arena, &mut hdr, n, &other).is_err());
        let mut bad = good.clone();
        bad[4] ^= 1; // the element count
        assert!(node_make_warm(&mut k.arena, &mut hdr, n, &bad).is_err());
        assert_eq!(cold_node_count(&hdr) as usize, nodes - 2);
        // Reading back every cold node gives the list byte for byte.
        let mut reads = vec![];
        let warmed = k
            .warm_parts(
                e,
                &mut |key: &[u8], stub| {
                    assert_eq!(key, b"l");
                    reads.push(stub);
                    Ok(file[&stub].clone())
                },
                false,
            )
            .unwrap();
        assert_eq!(warmed as usize, nodes - 2);
        assert_eq!(reads.len(), nodes - 2);
        assert_eq!(k.cold_part_count(e), 0);
        assert_eq!(k.tier.cold_parts, 0);
        assert_eq!(all(&k, e), model);
        assert_eq!(ql_bytes(&k.arena, k.value(e)), bytes_hot);
    }

    struct MapReader(std::collections::HashMap<ColdStub, Vec<u8>>, bool);
    impl crate::keyspace::tiered::ColdReader for MapReader {
        fn read_now(&mut self, _key: &[u8], stub: ColdStub) -> Result<Vec<u8>, String> {
            if self.1 {
                return Err("EIO".into());
            }
            Ok(self.0[&stub].clone())
        }
    }

    #[test]
    fn cold_nodes_freed_with_their_list_and_read_by_the_fallback() {
        let mut k = ks();
        long_list(&mut k, b"a", 2000);
        long_list(&mut k, b"b", 2000);
        let (_, model_c) = long_list(&mut k, b"c", 2000);
        let fa = cool_interior(&mut k, b"a");
        let fb = cool_interior(&mut k, b"b");
        let fc = cool_interior(&mut k, b"c");
        k.tier.reader = Some(Box::new(MapReader(fc.clone(), true)));
        // DEL hands every cold node's place to the bookkeeper's queue, with no read (the
        // gate lets DEL and a plain SET run on cold values as they are).
        k.tier.cold_ok = true;
        k.delete(0, b"a", 0);
        while k.lazyfree_step(1024) {}
        let mut freed: Vec<ColdStub> = std::mem::take(&mut k.tier.freed);
        freed.sort_by_key(|s| s.page);
        let mut want: Vec<ColdStub> = fa.keys().copied().collect();
        want.sort_by_key(|s| s.page);
        assert_eq!(freed, want);
        // An overwrite too (the list is big: its nodes go through the value graveyard).
        k.set_string(0, b"b", b"x", crate::keyspace::StrEnc::Embstr, Ttl::Clear);
        while k.lazyfree_step(1) {}
        k.tier.cold_ok = false;
        assert_eq!(std::mem::take(&mut k.tier.freed).len(), fb.len());
        assert_eq!(k.tier.cold_parts as usize, fc.len());
        // A lookup that needs the value reads its cold nodes; a failed read answers "no
        // such key" for that command and leaves the nodes cold.
        assert!(k.find(0, b"c", 0).is_none());
        assert_eq!(k.tier.sync_read_errors, 1);
        let e = k.find_raw(0, b"c").unwrap();
        assert_eq!(k.cold_part_count(e) as usize, fc.len());
        // A push or pop that the gate found touches only hot nodes leaves them cold.
        k.tier.cold_parts_ok = true;
        assert!(k.find(0, b"c", 0).is_some());
        assert_eq!(k.cold_part_count(e) as usize, fc.len());
        k.tier.cold_parts_ok = false;
        k.tier.reader = Some(Box::new(MapReader(fc.clone(), false)));
        let e = k.find(0, b"c", 0).unwrap();
        assert_eq!(k.cold_part_count(e), 0);
        assert_eq!(all(&k, e), model_c);
        // The places read back are given up (the nodes are written again if tiered again).
        assert_eq!(std::mem::take(&mut k.tier.freed).len(), fc.len());
    }

    #[test]
    fn image_validation_refuses_cold_nodes() {
        let mut k = ks();
        let (e, _) = long_list(&mut k, b"l", 2000);
        let hot = k.value(e).to_vec();
        let mut claims = Claims::new(&k.arena);
        assert!(validate(&k.arena, &mut claims, &hot, true, 0).is_ok());
        cool_interior(&mut k, b"l");
        let e = k.find_raw(0, b"l").unwrap();
        let v = k.value(e).to_vec();
        let mut claims = Claims::new(&k.arena);
        assert!(validate(&k.arena, &mut claims, &v, true, 0).is_err());
        // A header that counts none, over a cold node, is refused too.
        let mut zero = v.clone();
        zero[1..4].copy_from_slice(&[0, 0, 0]);
        let mut claims = Claims::new(&k.arena);
        assert!(validate(&k.arena, &mut claims, &zero, true, 0).is_err());
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
