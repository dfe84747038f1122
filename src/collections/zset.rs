//! Sorted-set storage in the arena, with Redis 7.0's two encodings.
//!
//! Entry value byte 0 is a tag:
//! * `0` — listpack (OBJECT ENCODING "listpack"): a Redis listpack of member, score,
//!   member, score... sorted by score then member (bytewise), scores written as Redis's
//!   `d2string` does (integers as listpack integers, others `%.17g`), so DUMP gives RDB
//!   type 17 byte for byte.
//! * `1` — skiplist ("skiplist"): `[1][pad 3][head Ref][DictHeader]` (56 bytes). Each
//!   member is ONE arena block that is at once a dict entry (member -> node) and a
//!   skiplist node with spans (O(log n) rank):
//!   `[dict next u32][member len u32][score f64][backward Ref][level u32][member, padded
//!   to 4][(forward Ref, span u32) x level]`. The head node (no member, 32 levels) keeps
//!   the list's current level (offset 8), length (offset 12) and tail (offset 16).
//!
//! Like Redis 7.0, a zset converts to a skiplist when `zset-max-listpack-entries` (128) or
//! `zset-max-listpack-value` (64) is crossed and never converts back; a set built whole
//! (RESTORE, store commands) gets the encoding its final content calls for.

use super::listpack::{self as lp, Val};
use crate::arena::dict::DictHeader;
use crate::arena::dict::DictUse;
use crate::arena::validate::{Claims, Corrupt};
use crate::arena::{Arena, Ref, NULL};
use crate::keyspace::{Keyspace, Kind, Ttl};

/// Redis's OBJ_ENCODING_SKIPLIST and OBJ_ENCODING_LISTPACK (the entry's encoding byte).
pub const ENC_SKIPLIST: u8 = 7;
pub const ENC_LISTPACK: u8 = 11;
const TAG_SL: u8 = 1;
const HEAD_OFF: usize = 4;
const DICT_OFF: usize = 8;
pub const SL_BYTES: usize = DICT_OFF + std::mem::size_of::<DictHeader>();

/// Redis's ZSKIPLIST_MAXLEVEL and ZSKIPLIST_P.
const MAX_LEVEL: usize = 32;
const LEVEL_P: u64 = 0xFFFF / 4;

// Node field offsets.
const N_MLEN: usize = 4;
const N_SCORE: usize = 8;
const N_BACK: usize = 16;
const N_LEVEL: usize = 20;
const N_MEMBER: usize = 24;
// Head node: the list's level, length and tail in its unused fields.
const H_LEVEL: usize = 8;
const H_LEN: usize = 12;
const H_TAIL: usize = N_BACK;

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
            max_entries: s.zset_max_listpack_entries,
            max_value: s.zset_max_listpack_value,
        }
    }
    /// Whether a zset of these members is stored as a listpack.
    pub fn fits(&self, n: u64, max_member_len: usize) -> bool {
        n <= self.max_entries && max_member_len as u64 <= self.max_value
    }
}

/// Owned (member, score) pairs.
pub type Pairs = Vec<(Vec<u8>, f64)>;

/// Redis's order: score, then member bytes.
pub fn cmp(s1: f64, m1: &[u8], s2: f64, m2: &[u8]) -> std::cmp::Ordering {
    s1.partial_cmp(&s2)
        .unwrap_or(std::cmp::Ordering::Equal)
        .then_with(|| m1.cmp(m2))
}

/// How Redis 7.0's zzlInsertAt writes a score into a listpack: an integral score within
/// ±2^62 (`double2ll`) as a listpack integer (so -0 becomes 0), anything else as its
/// `%.17g` text (`inf`, `-inf`).
pub fn d2string(v: f64) -> Vec<u8> {
    const LIM: f64 = (i64::MAX / 2) as f64;
    if v.is_nan() {
        return b"nan".to_vec();
    }
    if v.is_infinite() {
        return if v > 0.0 {
            b"inf".to_vec()
        } else {
            b"-inf".to_vec()
        };
    }
    if (-LIM..=LIM).contains(&v) && v == (v as i64) as f64 {
        return (v as i64).to_string().into_bytes();
    }
    crate::protocol::reply::format_g17(v).into_bytes()
}

/// A stored score back to a double (`strtod` of the listpack text, or the integer).
pub fn parse_stored_score(v: Val) -> f64 {
    match v {
        Val::Int(i) => i as f64,
        Val::Str(s) => parse_score_text(s).unwrap_or(0.0),
    }
}

/// Text scores as found in listpacks and old RDB types (`inf`, `-inf`, `nan` included).
pub fn parse_score_text(s: &[u8]) -> Option<f64> {
    let st = std::str::from_utf8(s).ok()?;
    match st.to_ascii_lowercase().as_str() {
        "inf" | "+inf" | "infinity" | "+infinity" => Some(f64::INFINITY),
        "-inf" | "-infinity" => Some(f64::NEG_INFINITY),
        "nan" | "-nan" => Some(f64::NAN),
        _ => st.parse::<f64>().ok(),
    }
}

/// Bytes of a listpack element (integers formatted into `buf`).
fn val_bytes<'a>(v: Val<'a>, buf: &'a mut [u8; 20]) -> &'a [u8] {
    match v {
        Val::Str(s) => s,
        Val::Int(i) => crate::util::fmt_i64(i, buf),
    }
}

pub fn is_sl(v: &[u8]) -> bool {
    v.first() == Some(&TAG_SL)
}

// ---- skiplist header in the entry value ----------------------------------------------------

#[derive(Clone, Copy)]
struct Sl {
    head: Ref,
    dict: DictHeader,
}

fn read_sl(v: &[u8]) -> Sl {
    let head = u32::from_le_bytes([
        v[HEAD_OFF],
        v[HEAD_OFF + 1],
        v[HEAD_OFF + 2],
        v[HEAD_OFF + 3],
    ]);
    let b = &v[DICT_OFF..SL_BYTES];
    // SAFETY: DictHeader is Pod (any bit pattern is valid) and `b` holds size_of bytes.
    let dict = unsafe { std::ptr::read_unaligned(b.as_ptr() as *const DictHeader) };
    Sl { head, dict }
}
fn write_sl(v: &mut [u8], s: &Sl) {
    v[0] = TAG_SL;
    v[HEAD_OFF..HEAD_OFF + 4].copy_from_slice(&s.head.to_le_bytes());
    // SAFETY: as `read_sl`; the destination holds size_of::<DictHeader>() bytes.
    unsafe {
        std::ptr::write_unaligned(
            v[DICT_OFF..SL_BYTES].as_mut_ptr() as *mut DictHeader,
            s.dict,
        )
    }
}
fn sl_value(s: &Sl) -> Vec<u8> {
    let mut v = vec![0u8; SL_BYTES];
    write_sl(&mut v, s);
    v
}

// ---- nodes -----------------------------------------------------------------------------------

#[inline]
fn lv_off(mlen: usize) -> usize {
    N_MEMBER + ((mlen + 3) & !3)
}
#[inline]
fn node_size(mlen: usize, level: usize) -> usize {
    lv_off(mlen) + 8 * level
}
#[inline]
fn n_mlen(a: &Arena, x: Ref) -> usize {
    a.read_u32(x, N_MLEN) as usize
}
#[inline]
fn n_level(a: &Arena, x: Ref) -> usize {
    a.read_u32(x, N_LEVEL) as usize
}
#[inline]
fn n_score(a: &Arena, x: Ref) -> f64 {
    f64::from_bits(a.read_u64(x, N_SCORE))
}
#[inline]
fn n_member(a: &Arena, x: Ref) -> &[u8] {
    a.bytes(x, N_MEMBER, n_mlen(a, x))
}
#[inline]
fn n_back(a: &Arena, x: Ref) -> Ref {
    a.read_u32(x, N_BACK)
}
#[inline]
fn set_back(a: &mut Arena, x: Ref, b: Ref) {
    a.write_u32(x, N_BACK, b)
}
#[inline]
fn fwd(a: &Arena, x: Ref, i: usize) -> Ref {
    a.read_u32(x, lv_off(n_mlen(a, x)) + 8 * i)
}
#[inline]
fn set_fwd(a: &mut Arena, x: Ref, i: usize, f: Ref) {
    let o = lv_off(n_mlen(a, x)) + 8 * i;
    a.write_u32(x, o, f)
}
#[inline]
fn span(a: &Arena, x: Ref, i: usize) -> u64 {
    a.read_u32(x, lv_off(n_mlen(a, x)) + 8 * i + 4) as u64
}
#[inline]
fn set_span(a: &mut Arena, x: Ref, i: usize, s: u64) {
    let o = lv_off(n_mlen(a, x)) + 8 * i + 4;
    a.write_u32(x, o, s as u32)
}
fn node_free(a: &mut Arena, x: Ref) {
    let s = node_size(n_mlen(a, x), n_level(a, x));
    a.free(x, s);
}
fn node_new(a: &mut Arena, member: &[u8], score: f64, level: usize) -> Ref {
    let size = node_size(member.len(), level);
    let x = a.alloc_zeroed(size);
    a.write_u32(x, N_MLEN, member.len() as u32);
    a.write_u64(x, N_SCORE, score.to_bits());
    a.write_u32(x, N_LEVEL, level as u32);
    a.bytes_mut(x, N_MEMBER, member.len())
        .copy_from_slice(member);
    x
}

fn h_level(a: &Arena, head: Ref) -> usize {
    a.read_u32(head, H_LEVEL) as usize
}
fn h_len(a: &Arena, head: Ref) -> u64 {
    a.read_u32(head, H_LEN) as u64
}
fn h_tail(a: &Arena, head: Ref) -> Ref {
    a.read_u32(head, H_TAIL)
}

fn sl_new(a: &mut Arena) -> Sl {
    let head = node_new(a, b"", 0.0, MAX_LEVEL);
    a.write_u32(head, H_LEVEL, 1);
    Sl {
        head,
        dict: DictHeader::new(N_MEMBER as u32),
    }
}

fn random_level(rng: &mut crate::util::Rng) -> usize {
    let mut l = 1;
    while l < MAX_LEVEL && (rng.next_u64() & 0xFFFF) < LEVEL_P {
        l += 1;
    }
    l
}

/// True if node `x` sorts before (score, member).
#[inline]
fn before(a: &Arena, x: Ref, score: f64, member: &[u8]) -> bool {
    let s = n_score(a, x);
    s < score || (s == score && n_member(a, x) < member)
}

/// Links node `x` (its level already set) into the list at its sorted place.
fn sl_link(a: &mut Arena, head: Ref, x: Ref) {
    let score = n_score(a, x);
    let member = n_member(a, x).to_vec();
    let mut update = [NULL; MAX_LEVEL];
    let mut rank = [0u64; MAX_LEVEL];
    let mut level = h_level(a, head);
    let mut p = head;
    for i in (0..level).rev() {
        rank[i] = if i == level - 1 { 0 } else { rank[i + 1] };
        loop {
            let f = fwd(a, p, i);
            if f == NULL || !before(a, f, score, &member) {
                break;
            }
            rank[i] += span(a, p, i);
            p = f;
        }
        update[i] = p;
    }
    let lvl = n_level(a, x);
    let len = h_len(a, head);
    if lvl > level {
        for i in level..lvl {
            rank[i] = 0;
            update[i] = head;
            set_span(a, head, i, len);
        }
        level = lvl;
        a.write_u32(head, H_LEVEL, level as u32);
    }
    for i in 0..lvl {
        let u = update[i];
        let uf = fwd(a, u, i);
        set_fwd(a, x, i, uf);
        set_fwd(a, u, i, x);
        let us = span(a, u, i);
        set_span(a, x, i, us - (rank[0] - rank[i]));
        set_span(a, u, i, rank[0] - rank[i] + 1);
    }
    for (i, &u) in update.iter().enumerate().take(level).skip(lvl) {
        let us = span(a, u, i);
        set_span(a, u, i, us + 1);
    }
    set_back(a, x, if update[0] == head { NULL } else { update[0] });
    let f0 = fwd(a, x, 0);
    if f0 != NULL {
        set_back(a, f0, x);
    } else {
        a.write_u32(head, H_TAIL, x);
    }
    a.write_u32(head, H_LEN, (len + 1) as u32);
}

/// The update path for (score, member): the last node before it on every level.
fn sl_path(a: &Arena, head: Ref, score: f64, member: &[u8]) -> [Ref; MAX_LEVEL] {
    let mut update = [NULL; MAX_LEVEL];
    let mut p = head;
    for i in (0..h_level(a, head)).rev() {
        loop {
            let f = fwd(a, p, i);
            if f == NULL || !before(a, f, score, member) {
                break;
            }
            p = f;
        }
        update[i] = p;
    }
    update
}

/// Unlinks node `x` given its update path (Redis's zslDeleteNode); does not free it.
fn sl_unlink(a: &mut Arena, head: Ref, x: Ref, update: &[Ref; MAX_LEVEL]) {
    let mut level = h_level(a, head);
    for (i, &u) in update.iter().enumerate().take(level) {
        if fwd(a, u, i) == x {
            let s = span(a, u, i) + span(a, x, i);
            set_span(a, u, i, s - 1);
            let xf = fwd(a, x, i);
            set_fwd(a, u, i, xf);
        } else {
            let s = span(a, u, i);
            set_span(a, u, i, s - 1);
        }
    }
    let f0 = fwd(a, x, 0);
    let b = n_back(a, x);
    if f0 != NULL {
        set_back(a, f0, b);
    } else {
        a.write_u32(head, H_TAIL, b);
    }
    while level > 1 && fwd(a, head, level - 1) == NULL {
        level -= 1;
    }
    a.write_u32(head, H_LEVEL, level as u32);
    let len = h_len(a, head);
    a.write_u32(head, H_LEN, (len - 1) as u32);
}

/// 1-based rank of a node that is in the list.
fn sl_rank(a: &Arena, head: Ref, score: f64, member: &[u8]) -> u64 {
    let mut rank = 0;
    let mut p = head;
    for i in (0..h_level(a, head)).rev() {
        loop {
            let f = fwd(a, p, i);
            if f == NULL {
                break;
            }
            let fs = n_score(a, f);
            if fs < score || (fs == score && n_member(a, f) <= member) {
                rank += span(a, p, i);
                p = f;
            } else {
                break;
            }
        }
        if p != head && n_member(a, p) == member {
            return rank;
        }
    }
    0
}

/// The node of 1-based rank `r` (Redis's zslGetElementByRank).
fn sl_by_rank(a: &Arena, head: Ref, r: u64) -> Ref {
    let mut traversed = 0;
    let mut p = head;
    for i in (0..h_level(a, head)).rev() {
        loop {
            let f = fwd(a, p, i);
            if f == NULL || traversed + span(a, p, i) > r {
                break;
            }
            traversed += span(a, p, i);
            p = f;
        }
        if traversed == r {
            return p;
        }
    }
    NULL
}

/// How many leading elements satisfy `pred` (which must hold for a prefix of the order).
fn sl_count_prefix(a: &Arena, head: Ref, pred: &dyn Fn(f64, &[u8]) -> bool) -> u64 {
    let mut rank = 0;
    let mut p = head;
    for i in (0..h_level(a, head)).rev() {
        loop {
            let f = fwd(a, p, i);
            if f == NULL || !pred(n_score(a, f), n_member(a, f)) {
                break;
            }
            rank += span(a, p, i);
            p = f;
        }
    }
    rank
}

/// Inserts a member known to be absent (list and dict).
fn sl_insert(a: &mut Arena, rng: &mut crate::util::Rng, s: &mut Sl, member: &[u8], score: f64) {
    let x = node_new(a, member, score, random_level(rng));
    sl_link(a, s.head, x);
    let h = a.hash(member);
    s.dict.insert_new(a, x, h);
}

/// Removes a member's node `x` (list and dict) and frees it.
fn sl_remove_node(a: &mut Arena, s: &mut Sl, x: Ref) {
    let (score, member) = (n_score(a, x), n_member(a, x).to_vec());
    let update = sl_path(a, s.head, score, &member);
    sl_unlink(a, s.head, x, &update);
    let h = a.hash(&member);
    s.dict.unlink(a, x, h);
    node_free(a, x);
}

/// Changes a member's score, moving its node only if its place changes (zslUpdateScore).
fn sl_update_score(a: &mut Arena, head: Ref, x: Ref, score: f64) {
    let b = n_back(a, x);
    let f = fwd(a, x, 0);
    let member = n_member(a, x).to_vec();
    let stays = (b == NULL
        || n_score(a, b) < score
        || (n_score(a, b) == score && n_member(a, b) < &member[..]))
        && (f == NULL
            || n_score(a, f) > score
            || (n_score(a, f) == score && n_member(a, f) > &member[..]));
    if stays {
        a.write_u64(x, N_SCORE, score.to_bits());
        return;
    }
    let update = sl_path(a, head, n_score(a, x), &member);
    sl_unlink(a, head, x, &update);
    a.write_u64(x, N_SCORE, score.to_bits());
    sl_link(a, head, x);
}

/// Deletes the nodes of 1-based ranks start..=end (zslDeleteRangeByRank).
fn sl_delete_rank_range(a: &mut Arena, s: &mut Sl, start: u64, end: u64) -> u64 {
    let head = s.head;
    let mut update = [NULL; MAX_LEVEL];
    let mut traversed = 0;
    let mut p = head;
    for i in (0..h_level(a, head)).rev() {
        loop {
            let f = fwd(a, p, i);
            if f == NULL || traversed + span(a, p, i) >= start {
                break;
            }
            traversed += span(a, p, i);
            p = f;
        }
        update[i] = p;
    }
    traversed += 1;
    let mut x = fwd(a, p, 0);
    let mut removed = 0;
    while x != NULL && traversed <= end {
        let next = fwd(a, x, 0);
        sl_unlink(a, head, x, &update);
        let h = a.hash(n_member(a, x));
        s.dict.unlink(a, x, h);
        node_free(a, x);
        removed += 1;
        traversed += 1;
        x = next;
    }
    removed
}

// ---- out-of-line lifetime (called by the keyspace) ---------------------------------------------

pub fn sl_len(v: &[u8]) -> u64 {
    read_sl(v).dict.len()
}

pub fn sl_free_all(a: &mut Arena, v: &[u8]) {
    let mut s = read_sl(v);
    while !s.dict.destroy_some(a, usize::MAX, node_free) {}
    node_free(a, s.head);
}

/// Frees up to `budget` nodes of a detached zset whose value header is in `hdr`.
pub fn sl_free_some(a: &mut Arena, hdr: &mut [u8], budget: usize) -> (u64, bool) {
    let mut s = read_sl(hdr);
    let before = s.dict.len();
    let done = s.dict.destroy_some(a, budget.max(1), node_free);
    if done {
        node_free(a, s.head);
    }
    write_sl(hdr, &s);
    (before - s.dict.len(), done)
}

pub fn sl_bytes(a: &Arena, v: &[u8]) -> u64 {
    let s = read_sl(v);
    let mut sum = s.dict.table_bytes() + crate::arena::size_class(node_size(0, MAX_LEVEL)).1 as u64;
    let mut x = fwd(a, s.head, 0);
    while x != NULL {
        sum += crate::arena::size_class(node_size(n_mlen(a, x), n_level(a, x))).1 as u64;
        x = fwd(a, x, 0);
    }
    sum
}

/// Deep copy (COPY): the same members and scores in a new skiplist.
pub fn sl_clone(a: &mut Arena, rng: &mut crate::util::Rng, v: &[u8]) -> Vec<u8> {
    let src = read_sl(v);
    let mut items = vec![];
    let mut x = fwd(a, src.head, 0);
    while x != NULL {
        items.push((n_member(a, x).to_vec(), n_score(a, x)));
        x = fwd(a, x, 0);
    }
    let mut s = sl_new(a);
    for (m, sc) in &items {
        sl_insert(a, rng, &mut s, m, *sc);
    }
    sl_value(&s)
}

// ---- keyspace-level operations --------------------------------------------------------------

/// An inline (listpack) sorted set value, well formed.
pub fn inline_is_valid(v: &[u8]) -> bool {
    !is_sl(v) && v.first() == Some(&0) && lp::validate(inline_lp(v), true)
}

fn inline_lp(v: &[u8]) -> &[u8] {
    &v[1..]
}

pub fn len(ks: &Keyspace, e: Ref) -> u64 {
    let v = ks.value(e);
    if is_sl(v) {
        sl_len(v)
    } else {
        (lp::count(inline_lp(v)) / 2) as u64
    }
}

/// Listpack: (offset of the member entry, its score, 0-based index) of `m`.
fn lp_find(l: &[u8], m: &[u8]) -> Option<(usize, f64, u64)> {
    let mut p = lp::first(l);
    let mut i = 0;
    while let Some(o) = p {
        let so = lp::next(l, o)?;
        if lp::get(l, o).eq_bytes(m) {
            return Some((o, parse_stored_score(lp::get(l, so)), i));
        }
        p = lp::next(l, so);
        i += 1;
    }
    None
}

fn sl_find(ks: &Keyspace, s: &Sl, m: &[u8]) -> Option<Ref> {
    let h = ks.arena.hash(m);
    s.dict.find(&ks.arena, m, h)
}

/// A member's score.
pub fn score(ks: &Keyspace, e: Ref, m: &[u8]) -> Option<f64> {
    let v = ks.value(e);
    if is_sl(v) {
        let s = read_sl(v);
        sl_find(ks, &s, m).map(|x| n_score(&ks.arena, x))
    } else {
        lp_find(inline_lp(v), m).map(|(_, sc, _)| sc)
    }
}

/// A member's 0-based rank (ascending) and score.
pub fn rank(ks: &Keyspace, e: Ref, m: &[u8]) -> Option<(u64, f64)> {
    let v = ks.value(e);
    if is_sl(v) {
        let s = read_sl(v);
        let x = sl_find(ks, &s, m)?;
        let sc = n_score(&ks.arena, x);
        let r = sl_rank(&ks.arena, s.head, sc, m);
        Some((r - 1, sc))
    } else {
        lp_find(inline_lp(v), m).map(|(_, sc, i)| (i, sc))
    }
}

/// How many leading elements (in order) satisfy `pred`, which must hold for a prefix:
/// the basis of every score and lex range (O(log n) on a skiplist).
pub fn count_prefix(ks: &Keyspace, e: Ref, pred: &dyn Fn(f64, &[u8]) -> bool) -> u64 {
    let v = ks.value(e);
    if is_sl(v) {
        let s = read_sl(v);
        return sl_count_prefix(&ks.arena, s.head, pred);
    }
    let l = inline_lp(v);
    let mut n = 0;
    let mut p = lp::first(l);
    let mut buf = [0u8; 20];
    while let Some(o) = p {
        let Some(so) = lp::next(l, o) else { break };
        let sc = parse_stored_score(lp::get(l, so));
        if !pred(sc, val_bytes(lp::get(l, o), &mut buf)) {
            break;
        }
        n += 1;
        p = lp::next(l, so);
    }
    n
}

/// Visits elements from 0-based index `start`, ascending (or descending with `rev`),
/// while `f` returns true.
pub fn walk(ks: &Keyspace, e: Ref, start: u64, rev: bool, mut f: impl FnMut(&[u8], f64) -> bool) {
    let v = ks.value(e);
    if is_sl(v) {
        let s = read_sl(v);
        let a = &ks.arena;
        let mut x = sl_by_rank(a, s.head, start + 1);
        while x != NULL {
            if !f(n_member(a, x), n_score(a, x)) {
                return;
            }
            x = if rev { n_back(a, x) } else { fwd(a, x, 0) };
        }
        return;
    }
    let l = inline_lp(v);
    let mut p = lp::seek(l, 2 * start as i64);
    let mut buf = [0u8; 20];
    while let Some(o) = p {
        let Some(so) = lp::next(l, o) else { return };
        let sc = parse_stored_score(lp::get(l, so));
        if !f(val_bytes(lp::get(l, o), &mut buf), sc) {
            return;
        }
        p = if rev {
            lp::prev(l, o).and_then(|x| lp::prev(l, x))
        } else {
            lp::next(l, so)
        };
    }
}

/// Elements of 0-based indices lo..=hi: ascending, or from hi down to lo with `rev`.
pub fn range(ks: &Keyspace, e: Ref, lo: u64, hi: u64, rev: bool) -> Pairs {
    let mut out = Vec::with_capacity((hi - lo + 1).min(1 << 16) as usize);
    let n = hi - lo + 1;
    walk(ks, e, if rev { hi } else { lo }, rev, |m, s| {
        out.push((m.to_vec(), s));
        (out.len() as u64) < n
    });
    out
}

/// All elements in order.
pub fn all(ks: &Keyspace, e: Ref) -> Pairs {
    let n = len(ks, e);
    if n == 0 {
        return vec![];
    }
    range(ks, e, 0, n - 1, false)
}

/// Creates an empty zset in the encoding ZADD would choose for its first member.
pub fn create(ks: &mut Keyspace, db: usize, key: &[u8], skiplist: bool) -> Ref {
    if skiplist {
        let s = sl_new(&mut ks.arena);
        return ks.set_value(db, key, Kind::ZSet, ENC_SKIPLIST, &sl_value(&s), Ttl::Clear);
    }
    let mut v = vec![0u8];
    v.extend_from_slice(&lp::empty());
    ks.set_value(db, key, Kind::ZSet, ENC_LISTPACK, &v, Ttl::Clear)
}

/// A sorted listpack of these (sorted, distinct) pairs.
fn build_lp(pairs: &[(Vec<u8>, f64)]) -> Vec<u8> {
    let mut l = lp::empty();
    for (m, s) in pairs {
        let end = l.len() - 1;
        lp::push_vec(&mut l, end, m);
        let end = l.len() - 1;
        lp::push_vec(&mut l, end, &d2string(*s));
    }
    l
}

/// Converts a listpack zset to a skiplist.
fn to_sl(ks: &mut Keyspace, db: usize, e: Ref) -> Ref {
    let pairs = all(ks, e);
    let mut s = sl_new(&mut ks.arena);
    for (m, sc) in &pairs {
        sl_insert(&mut ks.arena, &mut ks.rng, &mut s, m, *sc);
    }
    let e = ks.resize_value(db, e, SL_BYTES);
    ks.value_mut(e).copy_from_slice(&sl_value(&s));
    ks.set_enc_byte(e, ENC_SKIPLIST);
    e
}

/// Writes a listpack back into the entry.
fn put_lp(ks: &mut Keyspace, db: usize, e: Ref, l: &[u8]) -> Ref {
    let e = ks.resize_value(db, e, 1 + l.len());
    ks.value_mut(e)[1..].copy_from_slice(l);
    e
}

/// Inserts (member, score) at its sorted place in a Vec-held listpack (member absent).
fn lp_insert_sorted(l: &mut Vec<u8>, m: &[u8], score: f64) {
    let mut p = lp::first(l);
    let mut at = l.len() - 1;
    let mut buf = [0u8; 20];
    while let Some(o) = p {
        let Some(so) = lp::next(l, o) else { break };
        let sc = parse_stored_score(lp::get(l, so));
        if sc > score || (sc == score && val_bytes(lp::get(l, o), &mut buf) > m) {
            at = o;
            break;
        }
        p = lp::next(l, so);
    }
    let sbytes = d2string(score);
    lp::push_vec(l, at, m);
    let at2 = at + lp::entry_len(m);
    lp::push_vec(l, at2, &sbytes);
}

/// Deletes the pair whose member entry is at `o` from a Vec-held listpack.
fn lp_delete_pair(l: &mut Vec<u8>, o: usize) {
    let n1 = lp::delete_in_place(l, o);
    let n2 = lp::delete_in_place(l, o);
    l.truncate(l.len() - n1 - n2);
}

/// ZADD's flags (Redis's ZADD_IN_*).
#[derive(Clone, Copy, Default, Debug)]
pub struct AddFlags {
    pub incr: bool,
    pub nx: bool,
    pub xx: bool,
    pub gt: bool,
    pub lt: bool,
}

/// What an add did (Redis's ZADD_OUT_*). `score` is the member's score afterwards when
/// something was processed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum AddOut {
    Added(f64),
    Updated(f64),
    /// Processed but unchanged (same score).
    Same(f64),
    Nop,
    Nan,
}

/// Redis's zsetAdd.
pub fn add(
    ks: &mut Keyspace,
    db: usize,
    e: Ref,
    m: &[u8],
    mut score: f64,
    fl: AddFlags,
    lim: Limits,
) -> (Ref, AddOut) {
    if score.is_nan() {
        return (e, AddOut::Nan);
    }
    let v = ks.value(e);
    let cur = if is_sl(v) {
        let s = read_sl(v);
        sl_find(ks, &s, m).map(|x| (n_score(&ks.arena, x), x as usize))
    } else {
        lp_find(inline_lp(v), m).map(|(o, sc, _)| (sc, o))
    };
    match cur {
        Some((curscore, at)) => {
            if fl.nx {
                return (e, AddOut::Nop);
            }
            if fl.incr {
                score += curscore;
                if score.is_nan() {
                    return (e, AddOut::Nan);
                }
            }
            if (fl.lt && score >= curscore) || (fl.gt && score <= curscore) {
                return (e, AddOut::Nop);
            }
            if score == curscore {
                return (e, AddOut::Same(score));
            }
            if is_sl(ks.value(e)) {
                let s = read_sl(ks.value(e));
                sl_update_score(&mut ks.arena, s.head, at as Ref, score);
                return (e, AddOut::Updated(score));
            }
            let mut l = inline_lp(ks.value(e)).to_vec();
            lp_delete_pair(&mut l, at);
            lp_insert_sorted(&mut l, m, score);
            (put_lp(ks, db, e, &l), AddOut::Updated(score))
        }
        None if fl.xx => (e, AddOut::Nop),
        None => {
            let mut e = e;
            if !is_sl(ks.value(e)) {
                if len(ks, e) + 1 > lim.max_entries || m.len() as u64 > lim.max_value {
                    e = to_sl(ks, db, e);
                } else {
                    let mut l = inline_lp(ks.value(e)).to_vec();
                    lp_insert_sorted(&mut l, m, score);
                    return (put_lp(ks, db, e, &l), AddOut::Added(score));
                }
            }
            let mut s = read_sl(ks.value(e));
            sl_insert(&mut ks.arena, &mut ks.rng, &mut s, m, score);
            write_sl(ks.value_mut(e), &s);
            (e, AddOut::Added(score))
        }
    }
}

/// Removes a member. Returns (entry, removed). The caller deletes an emptied key.
pub fn remove(ks: &mut Keyspace, db: usize, e: Ref, m: &[u8]) -> (Ref, bool) {
    let v = ks.value(e);
    if is_sl(v) {
        let mut s = read_sl(v);
        let Some(x) = sl_find(ks, &s, m) else {
            return (e, false);
        };
        sl_remove_node(&mut ks.arena, &mut s, x);
        s.dict.shrink_if_sparse(&mut ks.arena);
        write_sl(ks.value_mut(e), &s);
        return (e, true);
    }
    let Some((o, _, _)) = lp_find(inline_lp(v), m) else {
        return (e, false);
    };
    let mut l = inline_lp(v).to_vec();
    lp_delete_pair(&mut l, o);
    (put_lp(ks, db, e, &l), true)
}

/// Removes the elements of 0-based indices lo..=hi. Returns (entry, removed).
pub fn remove_range(ks: &mut Keyspace, db: usize, e: Ref, lo: u64, hi: u64) -> (Ref, u64) {
    let v = ks.value(e);
    if is_sl(v) {
        let mut s = read_sl(v);
        let n = sl_delete_rank_range(&mut ks.arena, &mut s, lo + 1, hi + 1);
        s.dict.shrink_if_sparse(&mut ks.arena);
        write_sl(ks.value_mut(e), &s);
        return (e, n);
    }
    let mut l = inline_lp(v).to_vec();
    let Some(o) = lp::seek(&l, 2 * lo as i64) else {
        return (e, 0);
    };
    let mut n = 0;
    while n < hi - lo + 1 && l[o] != lp::EOF {
        lp_delete_pair(&mut l, o);
        n += 1;
    }
    (put_lp(ks, db, e, &l), n)
}

/// Creates a zset from pairs (RESTORE, RDB load, store commands), in the encoding Redis
/// gives a zset with this content. Duplicate members keep their last score. Returns None
/// (and creates nothing) when `pairs` is empty.
pub fn create_from(
    ks: &mut Keyspace,
    db: usize,
    key: &[u8],
    mut pairs: Pairs,
    ttl: Ttl,
    lim: Limits,
) -> Option<Ref> {
    if pairs.is_empty() {
        return None;
    }
    let maxlen = pairs.iter().map(|(m, _)| m.len()).max().unwrap_or(0);
    if lim.fits(pairs.len() as u64, maxlen) {
        pairs.sort_by(|x, y| x.0.cmp(&y.0));
        pairs.dedup_by(|later, earlier| {
            if later.0 == earlier.0 {
                earlier.1 = later.1;
                true
            } else {
                false
            }
        });
        pairs.sort_by(|x, y| cmp(x.1, &x.0, y.1, &y.0));
        let mut v = vec![0u8];
        v.extend_from_slice(&build_lp(&pairs));
        return Some(ks.set_value(db, key, Kind::ZSet, ENC_LISTPACK, &v, ttl));
    }
    let mut s = sl_new(&mut ks.arena);
    for (m, sc) in &pairs {
        let h = ks.arena.hash(m);
        match s.dict.find(&ks.arena, m, h) {
            Some(x) => sl_update_score(&mut ks.arena, s.head, x, *sc),
            None => sl_insert(&mut ks.arena, &mut ks.rng, &mut s, m, *sc),
        }
    }
    Some(ks.set_value(db, key, Kind::ZSet, ENC_SKIPLIST, &sl_value(&s), ttl))
}

/// One ZSCAN step: (next cursor, pairs). Listpack zsets return everything at once.
pub fn scan(ks: &Keyspace, e: Ref, cursor: u64, count: u64) -> (u64, Pairs) {
    let v = ks.value(e);
    if !is_sl(v) {
        return (0, all(ks, e));
    }
    let s = read_sl(v);
    let a = &ks.arena;
    let mut out = vec![];
    let mut c = cursor;
    // Redis's maxiterations: at most count*10 buckets per call.
    let mut iters = count.saturating_mul(10).max(1);
    loop {
        c = s
            .dict
            .scan(a, c, |x| out.push((n_member(a, x).to_vec(), n_score(a, x))));
        iters -= 1;
        if c == 0 || iters == 0 || out.len() as u64 >= count {
            break;
        }
    }
    (c, out)
}

/// A uniformly random element.
pub fn random(ks: &mut Keyspace, e: Ref) -> Option<(Vec<u8>, f64)> {
    let v = ks.value(e);
    if is_sl(v) {
        let s = read_sl(v);
        let x = s.dict.random(&ks.arena, &mut ks.rng)?;
        return Some((n_member(&ks.arena, x).to_vec(), n_score(&ks.arena, x)));
    }
    let n = len(ks, e);
    if n == 0 {
        return None;
    }
    let i = ks.rng.below(n);
    range(ks, e, i, i, false).pop()
}

/// The sorted set's listpack bytes when it is stored as one (None: a skiplist), for
/// writers of formats that keep the encoding (DUMP, RDB).
pub fn listpack(ks: &Keyspace, e: Ref) -> Option<&[u8]> {
    let v = ks.value(e);
    (!is_sl(v)).then(|| inline_lp(v))
}

/// Visits a skiplist-encoded sorted set's (member, score) pairs from the greatest down
/// (the order Redis writes RDB_TYPE_ZSET_2 in); visits nothing for a listpack.
pub fn for_each_descending<'k>(ks: &'k Keyspace, e: Ref, mut f: impl FnMut(&'k [u8], f64)) {
    let v = ks.value(e);
    if !is_sl(v) {
        return;
    }
    let s = read_sl(v);
    let a = &ks.arena;
    let mut x = h_tail(a, s.head);
    while x != NULL {
        f(n_member(a, x), n_score(a, x));
        x = n_back(a, x);
    }
}

/// Elements of a skiplist-encoded sorted set (0 for a listpack: see [`listpack`]).
pub fn skiplist_len(ks: &Keyspace, e: Ref) -> u64 {
    let v = ks.value(e);
    if is_sl(v) {
        sl_len(v)
    } else {
        0
    }
}

// ---- image validation ----------------------------------------------------------------------

/// Checks a sorted-set value restored from a snapshot image (`live`: a key's value;
/// otherwise the header a value-graveyard node keeps of a detached skiplist being freed,
/// whose dict and head are checked as memory only). `at`: where the value lies.
///
/// A live skiplist must be exactly what the insert and delete code keeps: every dict
/// entry a node of level 1..=32 on the level-0 list in (score, member) order with its
/// back link, every level's list holding exactly the nodes that tall in rank order, and
/// every span the rank distance to its forward node (to the end for the last): the
/// span arithmetic of inserts and deletes relies on it, and a forward link is read at a
/// level only on nodes that tall.
pub fn validate(
    a: &Arena,
    claims: &mut Claims,
    v: &[u8],
    live: bool,
    at: u64,
) -> Result<(), Corrupt> {
    if !is_sl(v) {
        if live && inline_is_valid(v) {
            return Ok(());
        }
        return Err(Corrupt::new(
            "zset value is neither a valid listpack nor a skiplist",
            at,
        ));
    }
    super::check_header_len(v, live, SL_BYTES, "skiplist header", at)?;
    let s = read_sl(v);
    claims.claim(s.head, node_size(0, MAX_LEVEL) as u64, "skiplist head")?;
    if n_mlen(a, s.head) != 0 || n_level(a, s.head) != MAX_LEVEL {
        return Err(Corrupt::at("skiplist head is not a head node", s.head));
    }
    let usage = DictUse::of(live);
    let mut ranks: std::collections::HashMap<Ref, u64> = std::collections::HashMap::new();
    let mut taller_than = [0u64; MAX_LEVEL];
    s.dict
        .validate(a, claims, N_MEMBER as u32, usage, at, |a, claims, x| {
            claims.peek(x, N_MEMBER as u64, "skiplist node")?;
            let level = n_level(a, x);
            if !(1..=MAX_LEVEL).contains(&level) {
                return Err(Corrupt::at(format!("skiplist node of level {level}"), x));
            }
            claims.claim(x, node_size(n_mlen(a, x), level) as u64, "skiplist node")?;
            if live {
                ranks.insert(x, 0);
                for t in taller_than.iter_mut().take(level) {
                    *t += 1;
                }
            }
            Ok(())
        })?;
    if !live {
        return Ok(());
    }
    let head = s.head;
    let len = s.dict.len();
    let level = h_level(a, head);
    if h_len(a, head) != len || !(1..=MAX_LEVEL).contains(&level) {
        return Err(Corrupt::at(
            format!(
                "skiplist head says {} members at level {level}; the dict holds {len}",
                h_len(a, head)
            ),
            head,
        ));
    }
    if (level..MAX_LEVEL).any(|i| fwd(a, head, i) != NULL) {
        return Err(Corrupt::at("skiplist head links above its level", head));
    }
    // Level 0 gives every node its rank, its order and its back link.
    let (mut prev, mut rank, mut x) = (NULL, 0u64, fwd(a, head, 0));
    while x != NULL {
        rank += 1;
        match ranks.get_mut(&x) {
            Some(r) if *r == 0 => *r = rank,
            _ => {
                return Err(Corrupt::at(
                    "skiplist node not in its dict, or reached twice",
                    x,
                ))
            }
        }
        if n_back(a, x) != prev {
            return Err(Corrupt::at("skiplist node's back link", x));
        }
        if prev != NULL && !before(a, prev, n_score(a, x), n_member(a, x)) {
            return Err(Corrupt::at(
                "skiplist nodes out of (score, member) order",
                x,
            ));
        }
        prev = x;
        x = fwd(a, x, 0);
    }
    if rank != len || h_tail(a, head) != prev {
        return Err(Corrupt::at(
            format!("skiplist level 0 holds {rank} of {len} members, or its tail is wrong"),
            head,
        ));
    }
    for (i, &taller) in taller_than.iter().enumerate().take(level) {
        let (mut p, mut p_rank, mut seen) = (head, 0u64, 0u64);
        loop {
            let f = fwd(a, p, i);
            let sp = span(a, p, i);
            if f == NULL {
                if sp != len - p_rank {
                    return Err(Corrupt::at(
                        format!("skiplist span at level {i} past the last node"),
                        p,
                    ));
                }
                break;
            }
            let f_rank = ranks.get(&f).copied().unwrap_or(0);
            if f_rank <= p_rank || n_level(a, f) <= i || sp != f_rank - p_rank {
                return Err(Corrupt::at(
                    format!("skiplist link or span at level {i}"),
                    p,
                ));
            }
            seen += 1;
            p = f;
            p_rank = f_rank;
        }
        if seen != taller {
            return Err(Corrupt::at(
                format!("skiplist level {i} links {seen} of its {taller} nodes"),
                head,
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ks() -> Keyspace {
        crate::collections::new_keyspace(Arena::new(1 << 30, [3, 4]).unwrap(), 1)
    }
    const LIM: Limits = Limits {
        max_entries: 128,
        max_value: 64,
    };

    fn check_sl(k: &Keyspace, e: Ref) {
        // Every rank query agrees with a plain walk; spans sum to the length.
        let v = k.value(e);
        let s = read_sl(v);
        let a = &k.arena;
        let mut x = fwd(a, s.head, 0);
        let mut r = 1;
        let mut prev: Option<(f64, Vec<u8>)> = None;
        while x != NULL {
            let (sc, m) = (n_score(a, x), n_member(a, x).to_vec());
            if let Some((ps, pm)) = &prev {
                assert_eq!(cmp(*ps, pm, sc, &m), std::cmp::Ordering::Less);
            }
            assert_eq!(sl_rank(a, s.head, sc, &m), r);
            assert_eq!(sl_by_rank(a, s.head, r), x);
            prev = Some((sc, m));
            r += 1;
            x = fwd(a, x, 0);
        }
        assert_eq!(r - 1, sl_len(v));
        assert_eq!(h_len(a, s.head), sl_len(v));
    }

    #[test]
    fn listpack_converts_and_ranks_stay_right() {
        let mut k = ks();
        let used0 = k.arena.used_bytes();
        let mut e = create(&mut k, 0, b"z", false);
        let mut model: Vec<(Vec<u8>, f64)> = vec![];
        let mut rng = crate::util::Rng::new(7);
        for i in 0..3000u64 {
            let m = format!("m{}", rng.below(1000)).into_bytes();
            let sc = (rng.below(50) as f64) - 10.0;
            let (ne, out) = add(&mut k, 0, e, &m, sc, AddFlags::default(), LIM);
            e = ne;
            assert!(!matches!(out, AddOut::Nan | AddOut::Nop));
            model.retain(|(x, _)| x != &m);
            model.push((m, sc));
            if i % 7 == 0 {
                let victim = format!("m{}", rng.below(1000)).into_bytes();
                let (ne, d) = remove(&mut k, 0, e, &victim);
                e = ne;
                let had = model.iter().any(|(x, _)| x == &victim);
                assert_eq!(d, had);
                model.retain(|(x, _)| x != &victim);
            }
        }
        model.sort_by(|x, y| cmp(x.1, &x.0, y.1, &y.0));
        assert!(is_sl(k.value(e)));
        assert_eq!(k.enc(e), ENC_SKIPLIST);
        check_sl(&k, e);
        assert_eq!(all(&k, e), model);
        let (i, sc) = rank(&k, e, &model[10].0).unwrap();
        assert_eq!((i, sc), (10, model[10].1));
        let below0 = count_prefix(&k, e, &|s, _| s < 0.0);
        assert_eq!(below0 as usize, model.iter().filter(|p| p.1 < 0.0).count());
        let (e, n) = remove_range(&mut k, 0, e, 5, 20);
        assert_eq!(n, 16);
        model.drain(5..=20);
        assert_eq!(all(&k, e), model);
        check_sl(&k, e);
        let rev = range(&k, e, 0, 3, true);
        assert_eq!(rev[0], model[3]);
        let c = k.clone_entry_to(e, 0, b"copy", Ttl::Keep);
        assert_eq!(all(&k, c), model);
        k.delete(0, b"z", 0);
        k.delete(0, b"copy", 0);
        while k.lazyfree_step(100) {}
        assert!(k.arena.used_bytes() - used0 <= 64);
    }

    #[test]
    fn listpack_bytes_match_redis() {
        // ZADD z 1 a 2.5 b -> Redis 7.0 DUMP's listpack.
        let mut k = ks();
        let mut e = create(&mut k, 0, b"z", false);
        e = add(&mut k, 0, e, b"b", 2.5, AddFlags::default(), LIM).0;
        e = add(&mut k, 0, e, b"a", 1.0, AddFlags::default(), LIM).0;
        let l = &k.value(e)[1..];
        assert_eq!(
            l,
            [
                0x14, 0, 0, 0, 4, 0, 0x81, b'a', 2, 1, 1, 0x81, b'b', 2, 0x83, b'2', b'.', b'5', 4,
                0xff
            ]
        );
        assert_eq!(d2string(0.1), b"0.10000000000000001");
        assert_eq!(d2string(-0.0), b"0");
        assert_eq!(d2string(4503599627370497.0), b"4503599627370497");
        assert_eq!(d2string(1e20), b"1e+20");
        assert_eq!(d2string(1e300), b"1.0000000000000001e+300");
    }
}
