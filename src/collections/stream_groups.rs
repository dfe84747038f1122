//! A stream's consumer groups in the arena (Redis 7.0's `streamCG`, `streamConsumer`,
//! `streamNACK`), reached from the `groups` reference of the stream's header.
//!
//! * **Groups** form a list sorted by name (bytewise, the order Redis's radix tree gives
//!   XINFO GROUPS): block `[next Ref][name_len u32][last-id 16][entries-read i64]
//!   [pel head Ref][consumers Ref][pel count u64][consumer count u64][name]`.
//! * **Consumers** of a group form a list sorted by name: block `[next Ref][name_len u32]
//!   [seen-time i64][pel head Ref][pad 4][pel count u64][name]`. Groups and consumers are
//!   few next to entries; finding one by name walks its list, O(groups) / O(consumers).
//! * **Pending entries** (NACKs): one block per entry, `[ms u64][seq u64][delivery-time
//!   i64][delivery-count u64][consumer Ref][level u32][group links × level][consumer links
//!   × level]`. Each NACK is a node of TWO skiplists at once: the group's PEL and its
//!   consumer's PEL (Redis shares one NACK between the two radix trees the same way).
//!   A skiplist is the simplest ordered map that is O(log n) per lookup, insert and
//!   delete with no rebalancing and no moving of other entries: XACK, XCLAIM and
//!   XREADGROUP touch one entry in O(log n), and the ordered walks XPENDING, XAUTOCLAIM
//!   and XINFO need are a chain to follow. A sorted array would make an XACK in the
//!   middle move every later entry. A node's level comes from a hash of its ID (1/4 of
//!   the nodes reach each next level), so a copy or a reload builds the same shape
//!   without a random source. Each list has a head node of [`MAX_LEVEL`] levels.
//!
//! Nothing here holds a pointer: every link is a `Ref`, so images, COPY and lazy free
//! work as for the rest of the stream.

use super::stream::Id;
use crate::arena::validate::{Claims, Corrupt};
use crate::arena::{Arena, Ref, NULL};
use std::collections::HashMap;

/// Levels of a head node (4^16 entries before the top level stops thinning the search).
pub const MAX_LEVEL: usize = 16;
const NODE_FIXED: usize = 40;
const HEAD_BYTES: usize = NODE_FIXED + 8 * MAX_LEVEL;
const GROUP_FIXED: usize = 56;
const CONSUMER_FIXED: usize = 32;
/// Redis's SCG_INVALID_ENTRIES_READ.
pub const INVALID_ENTRIES_READ: i64 = -1;

/// Which of a NACK's two chains.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Chain {
    Group = 0,
    Consumer = 1,
}

/// Redis's streamEstimateDistanceFromFirstEverEntry: the entries-read counter an ID
/// stands for, when it can be known ([`INVALID_ENTRIES_READ`] otherwise).
pub fn estimate_entries_read(m: &super::stream::Meta, id: Id) -> i64 {
    if m.entries_added == 0 {
        return 0;
    }
    if m.length == 0 && id <= m.last_id {
        return m.entries_added as i64;
    }
    if id == m.last_id {
        return m.entries_added as i64;
    }
    if id > m.last_id {
        return INVALID_ENTRIES_READ;
    }
    if m.max_deleted_id == Id::MIN || m.max_deleted_id < m.first_id {
        if id < m.first_id {
            return m.entries_added.wrapping_sub(m.length) as i64;
        }
        if id == m.first_id {
            return m.entries_added.wrapping_sub(m.length).wrapping_add(1) as i64;
        }
    }
    INVALID_ENTRIES_READ
}

/// Redis's streamRangeHasTombstones from `start` to the end.
pub fn has_tombstones_from(m: &super::stream::Meta, start: Id) -> bool {
    if m.length == 0 || m.max_deleted_id == Id::MIN || m.first_id > m.max_deleted_id {
        return false;
    }
    start <= m.max_deleted_id
}

/// Redis's streamReplyWithCGLag: the group's lag, None when it cannot be known.
pub fn lag(m: &super::stream::Meta, last_id: Id, entries_read: i64) -> Option<i64> {
    if m.entries_added == 0 {
        return Some(0);
    }
    if entries_read != INVALID_ENTRIES_READ && !has_tombstones_from(m, last_id) {
        return Some((m.entries_added as i64).wrapping_sub(entries_read));
    }
    let e = estimate_entries_read(m, last_id);
    (e != INVALID_ENTRIES_READ).then(|| (m.entries_added as i64).wrapping_sub(e))
}

// ---- nodes -------------------------------------------------------------------------------

fn level_of(a: &Arena, n: Ref) -> usize {
    a.read_u32(n, 36) as usize
}

fn link_off(level: usize, chain: Chain, l: usize) -> usize {
    NODE_FIXED + (chain as usize * level + l) * 4
}

fn fwd(a: &Arena, n: Ref, chain: Chain, l: usize) -> Ref {
    a.read_u32(n, link_off(level_of(a, n), chain, l))
}

fn set_fwd(a: &mut Arena, n: Ref, chain: Chain, l: usize, to: Ref) {
    let off = link_off(level_of(a, n), chain, l);
    a.write_u32(n, off, to);
}

fn node_id(a: &Arena, n: Ref) -> Id {
    Id::new(a.read_u64(n, 0), a.read_u64(n, 8))
}

fn node_bytes(level: usize) -> usize {
    NODE_FIXED + 8 * level
}

/// The level of a new node with `id`: a mix of its bits, two bits per level.
fn level_for(id: Id) -> usize {
    let mut x = id.ms ^ id.seq.rotate_left(32) ^ 0x9e37_79b9_7f4a_7c15;
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^= x >> 31;
    let mut level = 1;
    while level < MAX_LEVEL && x & 3 == 0 {
        level += 1;
        x >>= 2;
    }
    level
}

fn new_head(a: &mut Arena) -> Ref {
    let h = a.alloc_zeroed(HEAD_BYTES);
    a.write_u32(h, 36, MAX_LEVEL as u32);
    h
}

/// The last node of `chain` before `id` at every level (the head where none is).
fn preds(a: &Arena, head: Ref, chain: Chain, id: Id) -> [Ref; MAX_LEVEL] {
    let mut update = [head; MAX_LEVEL];
    let mut x = head;
    for l in (0..MAX_LEVEL).rev() {
        loop {
            let n = fwd(a, x, chain, l);
            if n == NULL || node_id(a, n) >= id {
                break;
            }
            x = n;
        }
        update[l] = x;
    }
    update
}

fn link(a: &mut Arena, head: Ref, chain: Chain, node: Ref) {
    let id = node_id(a, node);
    let update = preds(a, head, chain, id);
    for (l, &p) in update.iter().enumerate().take(level_of(a, node)) {
        let next = fwd(a, p, chain, l);
        set_fwd(a, node, chain, l, next);
        set_fwd(a, p, chain, l, node);
    }
}

/// Unlinks the node with `id` from `chain`; returns it.
fn unlink(a: &mut Arena, head: Ref, chain: Chain, id: Id) -> Option<Ref> {
    let update = preds(a, head, chain, id);
    let x = fwd(a, update[0], chain, 0);
    if x == NULL || node_id(a, x) != id {
        return None;
    }
    for (l, &p) in update.iter().enumerate().take(level_of(a, x)) {
        if fwd(a, p, chain, l) == x {
            let next = fwd(a, x, chain, l);
            set_fwd(a, p, chain, l, next);
        }
    }
    Some(x)
}

/// The first node of `chain` with an ID at least `id` (NULL: none).
fn seek(a: &Arena, head: Ref, chain: Chain, id: Id) -> Ref {
    let update = preds(a, head, chain, id);
    fwd(a, update[0], chain, 0)
}

fn last(a: &Arena, head: Ref, chain: Chain) -> Ref {
    let mut x = head;
    for l in (0..MAX_LEVEL).rev() {
        loop {
            let n = fwd(a, x, chain, l);
            if n == NULL {
                break;
            }
            x = n;
        }
    }
    if x == head {
        NULL
    } else {
        x
    }
}

// ---- NACKs -------------------------------------------------------------------------------

/// A pending entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Nack {
    pub id: Id,
    pub delivery_time_ms: i64,
    pub delivery_count: u64,
    pub consumer: Ref,
}

pub fn nack(a: &Arena, n: Ref) -> Nack {
    Nack {
        id: node_id(a, n),
        delivery_time_ms: a.read_u64(n, 16) as i64,
        delivery_count: a.read_u64(n, 24),
        consumer: a.read_u32(n, 32),
    }
}

pub fn set_delivery(a: &mut Arena, n: Ref, time_ms: i64, count: u64) {
    a.write_u64(n, 16, time_ms as u64);
    a.write_u64(n, 24, count);
}

/// The next pending entry of the group's PEL after `n` (NULL at the end).
pub fn pel_next(a: &Arena, n: Ref) -> Ref {
    fwd(a, n, Chain::Group, 0)
}

/// The next pending entry of the consumer's PEL after `n`.
pub fn cpel_next(a: &Arena, n: Ref) -> Ref {
    fwd(a, n, Chain::Consumer, 0)
}

// ---- groups ------------------------------------------------------------------------------

/// A group's fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    pub name: Vec<u8>,
    pub last_id: Id,
    pub entries_read: i64,
    pub pel_count: u64,
    pub consumer_count: u64,
}

fn name_len(a: &Arena, r: Ref) -> usize {
    a.read_u32(r, 4) as usize
}

fn g_next(a: &Arena, g: Ref) -> Ref {
    a.read_u32(g, 0)
}
fn g_name(a: &Arena, g: Ref) -> &[u8] {
    a.bytes(g, GROUP_FIXED, name_len(a, g))
}
fn g_pel(a: &Arena, g: Ref) -> Ref {
    a.read_u32(g, 32)
}
fn g_consumers(a: &Arena, g: Ref) -> Ref {
    a.read_u32(g, 36)
}

pub fn group(a: &Arena, g: Ref) -> Group {
    Group {
        name: g_name(a, g).to_vec(),
        last_id: Id::new(a.read_u64(g, 8), a.read_u64(g, 16)),
        entries_read: a.read_u64(g, 24) as i64,
        pel_count: a.read_u64(g, 40),
        consumer_count: a.read_u64(g, 48),
    }
}

pub fn group_name(a: &Arena, g: Ref) -> &[u8] {
    g_name(a, g)
}

pub fn set_group_last(a: &mut Arena, g: Ref, last_id: Id, entries_read: i64) {
    a.write_u64(g, 8, last_id.ms);
    a.write_u64(g, 16, last_id.seq);
    a.write_u64(g, 24, entries_read as u64);
}

/// The groups of a stream, in name order.
pub fn groups(a: &Arena, first: Ref) -> Vec<Ref> {
    let mut v = Vec::new();
    let mut g = first;
    while g != NULL {
        v.push(g);
        g = g_next(a, g);
    }
    v
}

pub fn group_count(a: &Arena, first: Ref) -> u64 {
    groups(a, first).len() as u64
}

pub fn find_group(a: &Arena, first: Ref, name: &[u8]) -> Option<Ref> {
    let mut g = first;
    while g != NULL {
        if g_name(a, g) == name {
            return Some(g);
        }
        g = g_next(a, g);
    }
    None
}

/// Adds a group (None when one has that name). `first` is the stream's groups list.
pub fn create_group(
    a: &mut Arena,
    first: &mut Ref,
    name: &[u8],
    last_id: Id,
    entries_read: i64,
) -> Option<Ref> {
    if find_group(a, *first, name).is_some() {
        return None;
    }
    let g = a.alloc_zeroed(GROUP_FIXED + name.len());
    a.write_u32(g, 4, name.len() as u32);
    set_group_last(a, g, last_id, entries_read);
    let head = new_head(a);
    a.write_u32(g, 32, head);
    a.bytes_mut(g, GROUP_FIXED, name.len())
        .copy_from_slice(name);
    insert_sorted(a, first, g, GROUP_FIXED);
    Some(g)
}

/// Inserts block `r` (a group or a consumer, names at `name_off`) into a name-sorted list.
fn insert_sorted(a: &mut Arena, first: &mut Ref, r: Ref, name_off: usize) {
    let name = a.bytes(r, name_off, name_len(a, r)).to_vec();
    let mut prev = NULL;
    let mut cur = *first;
    while cur != NULL && a.bytes(cur, name_off, name_len(a, cur)) < &name[..] {
        prev = cur;
        cur = a.read_u32(cur, 0);
    }
    a.write_u32(r, 0, cur);
    if prev == NULL {
        *first = r;
    } else {
        a.write_u32(prev, 0, r);
    }
}

/// Removes block `r` from a list.
fn remove_from_list(a: &mut Arena, first: &mut Ref, r: Ref) {
    let next = a.read_u32(r, 0);
    if *first == r {
        *first = next;
        return;
    }
    let mut cur = *first;
    while cur != NULL {
        let n = a.read_u32(cur, 0);
        if n == r {
            a.write_u32(cur, 0, next);
            return;
        }
        cur = n;
    }
}

/// XGROUP DESTROY: removes the group and frees it (its PEL and consumers included).
pub fn destroy_group(a: &mut Arena, first: &mut Ref, g: Ref) {
    remove_from_list(a, first, g);
    free_group(a, g);
}

fn free_group(a: &mut Arena, g: Ref) {
    while free_one_of_group(a, g) {}
    let head = g_pel(a, g);
    a.free(head, HEAD_BYTES);
    let n = name_len(a, g);
    a.free(g, GROUP_FIXED + n);
}

/// Frees one consumer or one NACK of group `g` (consumers first, so a half-freed group
/// keeps a well-formed PEL chain). False when only the group block and its head are left.
fn free_one_of_group(a: &mut Arena, g: Ref) -> bool {
    let c = g_consumers(a, g);
    if c != NULL {
        let next = a.read_u32(c, 0);
        a.write_u32(g, 36, next);
        free_consumer_block(a, c);
        return true;
    }
    let head = g_pel(a, g);
    let n = fwd(a, head, Chain::Group, 0);
    if n == NULL {
        return false;
    }
    for l in 0..level_of(a, n) {
        let next = fwd(a, n, Chain::Group, l);
        set_fwd(a, head, Chain::Group, l, next);
    }
    a.free(n, node_bytes(level_of(a, n)));
    true
}

fn free_consumer_block(a: &mut Arena, c: Ref) {
    let head = c_pel(a, c);
    a.free(head, HEAD_BYTES);
    let n = name_len(a, c);
    a.free(c, CONSUMER_FIXED + n);
}

// ---- consumers ---------------------------------------------------------------------------

/// A consumer's fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Consumer {
    pub name: Vec<u8>,
    pub seen_time_ms: i64,
    pub pel_count: u64,
}

fn c_pel(a: &Arena, c: Ref) -> Ref {
    a.read_u32(c, 16)
}

pub fn consumer(a: &Arena, c: Ref) -> Consumer {
    Consumer {
        name: consumer_name(a, c).to_vec(),
        seen_time_ms: a.read_u64(c, 8) as i64,
        pel_count: a.read_u64(c, 24),
    }
}

pub fn consumer_name(a: &Arena, c: Ref) -> &[u8] {
    a.bytes(c, CONSUMER_FIXED, name_len(a, c))
}

pub fn set_seen(a: &mut Arena, c: Ref, now_ms: i64) {
    a.write_u64(c, 8, now_ms as u64);
}

/// The consumers of group `g`, in name order.
pub fn consumers(a: &Arena, g: Ref) -> Vec<Ref> {
    let mut v = Vec::new();
    let mut c = g_consumers(a, g);
    while c != NULL {
        v.push(c);
        c = a.read_u32(c, 0);
    }
    v
}

pub fn find_consumer(a: &Arena, g: Ref, name: &[u8]) -> Option<Ref> {
    let mut c = g_consumers(a, g);
    while c != NULL {
        if consumer_name(a, c) == name {
            return Some(c);
        }
        c = a.read_u32(c, 0);
    }
    None
}

/// Adds a consumer seen at `now_ms` (None when one has that name).
pub fn create_consumer(a: &mut Arena, g: Ref, name: &[u8], now_ms: i64) -> Option<Ref> {
    if find_consumer(a, g, name).is_some() {
        return None;
    }
    let c = a.alloc_zeroed(CONSUMER_FIXED + name.len());
    a.write_u32(c, 4, name.len() as u32);
    set_seen(a, c, now_ms);
    let head = new_head(a);
    a.write_u32(c, 16, head);
    a.bytes_mut(c, CONSUMER_FIXED, name.len())
        .copy_from_slice(name);
    let mut first = g_consumers(a, g);
    insert_sorted(a, &mut first, c, CONSUMER_FIXED);
    a.write_u32(g, 36, first);
    let n = a.read_u64(g, 48);
    a.write_u64(g, 48, n + 1);
    Some(c)
}

/// XGROUP DELCONSUMER: drops the consumer's pending entries from the group's PEL too.
/// Returns how many it had.
pub fn delete_consumer(a: &mut Arena, g: Ref, c: Ref) -> u64 {
    let pending = a.read_u64(c, 24);
    let head = c_pel(a, c);
    loop {
        let n = fwd(a, head, Chain::Consumer, 0);
        if n == NULL {
            break;
        }
        let id = node_id(a, n);
        pel_remove(a, g, id);
    }
    let mut first = g_consumers(a, g);
    remove_from_list(a, &mut first, c);
    a.write_u32(g, 36, first);
    let k = a.read_u64(g, 48);
    a.write_u64(g, 48, k.saturating_sub(1));
    free_consumer_block(a, c);
    pending
}

// ---- the PEL -----------------------------------------------------------------------------

pub fn pel_find(a: &Arena, g: Ref, id: Id) -> Option<Ref> {
    let n = seek(a, g_pel(a, g), Chain::Group, id);
    (n != NULL && node_id(a, n) == id).then_some(n)
}

/// The first entry of the group's PEL with an ID at least `id` (NULL: none).
pub fn pel_seek(a: &Arena, g: Ref, id: Id) -> Ref {
    seek(a, g_pel(a, g), Chain::Group, id)
}

/// The first entry of consumer `c`'s PEL with an ID at least `id`.
pub fn cpel_seek(a: &Arena, c: Ref, id: Id) -> Ref {
    seek(a, c_pel(a, c), Chain::Consumer, id)
}

/// The group PEL's last entry (NULL when empty).
pub fn pel_last(a: &Arena, g: Ref) -> Ref {
    last(a, g_pel(a, g), Chain::Group)
}

fn bump(a: &mut Arena, r: Ref, off: usize, d: i64) {
    let v = a.read_u64(r, off);
    a.write_u64(r, off, v.wrapping_add(d as u64));
}

/// Adds entry `id` (not yet in the group's PEL) for consumer `c`.
pub fn pel_add(a: &mut Arena, g: Ref, c: Ref, id: Id, time_ms: i64, count: u64) -> Ref {
    let level = level_for(id);
    let n = a.alloc_zeroed(node_bytes(level));
    a.write_u64(n, 0, id.ms);
    a.write_u64(n, 8, id.seq);
    set_delivery(a, n, time_ms, count);
    a.write_u32(n, 32, c);
    a.write_u32(n, 36, level as u32);
    link(a, g_pel(a, g), Chain::Group, n);
    link(a, c_pel(a, c), Chain::Consumer, n);
    bump(a, g, 40, 1);
    bump(a, c, 24, 1);
    n
}

/// Removes entry `id` from the group's PEL and its consumer's; false when not pending.
pub fn pel_remove(a: &mut Arena, g: Ref, id: Id) -> bool {
    let Some(n) = unlink(a, g_pel(a, g), Chain::Group, id) else {
        return false;
    };
    let c = a.read_u32(n, 32);
    unlink(a, c_pel(a, c), Chain::Consumer, id);
    bump(a, g, 40, -1);
    bump(a, c, 24, -1);
    a.free(n, node_bytes(level_of(a, n)));
    true
}

/// Gives pending entry `n` to consumer `c` (a no-op when it has it).
pub fn pel_assign(a: &mut Arena, n: Ref, c: Ref) {
    let old = a.read_u32(n, 32);
    if old == c {
        return;
    }
    let id = node_id(a, n);
    unlink(a, c_pel(a, old), Chain::Consumer, id);
    bump(a, old, 24, -1);
    for l in 0..level_of(a, n) {
        set_fwd(a, n, Chain::Consumer, l, NULL);
    }
    a.write_u32(n, 32, c);
    link(a, c_pel(a, c), Chain::Consumer, n);
    bump(a, c, 24, 1);
}

// ---- whole values ------------------------------------------------------------------------

/// Blocks the groups own (for the lazy-free decision): NACKs, consumers, groups.
pub fn block_count(a: &Arena, first: Ref) -> u64 {
    groups(a, first)
        .iter()
        .map(|&g| 1 + a.read_u64(g, 40) + a.read_u64(g, 48))
        .sum()
}

/// Arena bytes of the groups (MEMORY USAGE): O(groups + consumers + pending entries).
pub fn bytes(a: &Arena, first: Ref) -> u64 {
    let class = |n: usize| crate::arena::size_class(n).1 as u64;
    let mut sum = 0;
    for g in groups(a, first) {
        sum += class(GROUP_FIXED + name_len(a, g)) + class(HEAD_BYTES);
        for c in consumers(a, g) {
            sum += class(CONSUMER_FIXED + name_len(a, c)) + class(HEAD_BYTES);
        }
        let mut n = pel_seek(a, g, Id::MIN);
        while n != NULL {
            sum += class(node_bytes(level_of(a, n)));
            n = pel_next(a, n);
        }
    }
    sum
}

pub fn free_all(a: &mut Arena, first: Ref) {
    let mut g = first;
    while g != NULL {
        let next = g_next(a, g);
        free_group(a, g);
        g = next;
    }
}

/// Frees up to `budget` blocks of a detached groups list starting at `*first` (updated).
/// Returns (blocks freed, done).
pub fn free_some(a: &mut Arena, first: &mut Ref, budget: usize) -> (u64, bool) {
    let mut n = 0u64;
    while *first != NULL && (n as usize) < budget.max(1) {
        let g = *first;
        if !free_one_of_group(a, g) {
            *first = g_next(a, g);
            free_group(a, g);
        }
        n += 1;
    }
    (n, *first == NULL)
}

/// A deep copy of a groups list (COPY); returns the new list.
pub fn clone(a: &mut Arena, first: Ref) -> Ref {
    let mut out = NULL;
    for g in groups(a, first) {
        let gi = group(a, g);
        let Some(ng) = create_group(a, &mut out, &gi.name, gi.last_id, gi.entries_read) else {
            continue;
        };
        let mut map: HashMap<Ref, Ref> = HashMap::new();
        for c in consumers(a, g) {
            let ci = consumer(a, c);
            if let Some(nc) = create_consumer(a, ng, &ci.name, ci.seen_time_ms) {
                map.insert(c, nc);
            }
        }
        let mut n = pel_seek(a, g, Id::MIN);
        while n != NULL {
            let k = nack(a, n);
            if let Some(&nc) = map.get(&k.consumer) {
                pel_add(a, ng, nc, k.id, k.delivery_time_ms, k.delivery_count);
            }
            n = pel_next(a, n);
        }
    }
    out
}

/// A group as read from RDB (checked by [`LoadedGroup::check`] before it is stored).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LoadedGroup {
    pub name: Vec<u8>,
    pub last_id: Id,
    pub entries_read: i64,
    /// (ID, delivery time, delivery count), ascending.
    pub pel: Vec<(Id, i64, u64)>,
    /// (name, seen time, IDs of its PEL ascending).
    pub consumers: Vec<(Vec<u8>, i64, Vec<Id>)>,
}

impl LoadedGroup {
    /// What Redis's loader requires: PEL IDs strictly ascending (no duplicate), every
    /// consumer's IDs in the group PEL and owned by one consumer only, every group PEL
    /// entry owned by some consumer (Redis refuses a NACK without a consumer in deep
    /// sanitization), consumer names distinct.
    pub fn check(&self) -> bool {
        if self.pel.windows(2).any(|w| w[0].0 >= w[1].0) {
            return false;
        }
        let index: HashMap<Id, usize> =
            self.pel.iter().enumerate().map(|(i, p)| (p.0, i)).collect();
        let mut owned = vec![false; self.pel.len()];
        let mut names = std::collections::HashSet::new();
        for (name, _, ids) in &self.consumers {
            if !names.insert(name.clone()) {
                return false;
            }
            for id in ids {
                let Some(&i) = index.get(id) else {
                    return false;
                };
                if owned[i] {
                    return false;
                }
                owned[i] = true;
            }
        }
        owned.iter().all(|&o| o)
    }

    /// Stores the group into the list `first` (a checked group).
    pub fn store(&self, a: &mut Arena, first: &mut Ref) {
        let Some(g) = create_group(a, first, &self.name, self.last_id, self.entries_read) else {
            return;
        };
        let times: HashMap<Id, (i64, u64)> = self.pel.iter().map(|p| (p.0, (p.1, p.2))).collect();
        for (name, seen, ids) in &self.consumers {
            let Some(c) = create_consumer(a, g, name, *seen) else {
                continue;
            };
            for id in ids {
                let (t, k) = times.get(id).copied().unwrap_or((0, 0));
                pel_add(a, g, c, *id, t, k);
            }
        }
    }

    /// Arena bytes the group will take.
    pub fn arena_bytes(&self) -> u64 {
        let mut sum = (GROUP_FIXED + self.name.len() + HEAD_BYTES) as u64;
        for (name, _, _) in &self.consumers {
            sum += (CONSUMER_FIXED + name.len() + HEAD_BYTES) as u64;
        }
        sum + self.pel.len() as u64 * node_bytes(MAX_LEVEL) as u64
    }
}

/// Reads a stored group back in [`LoadedGroup`] form (the RDB writer).
pub fn export(a: &Arena, g: Ref) -> LoadedGroup {
    let gi = group(a, g);
    let mut pel = Vec::with_capacity(gi.pel_count as usize);
    let mut n = pel_seek(a, g, Id::MIN);
    while n != NULL {
        let k = nack(a, n);
        pel.push((k.id, k.delivery_time_ms, k.delivery_count));
        n = pel_next(a, n);
    }
    let mut cs = Vec::new();
    for c in consumers(a, g) {
        let ci = consumer(a, c);
        let mut ids = Vec::with_capacity(ci.pel_count as usize);
        let mut n = cpel_seek(a, c, Id::MIN);
        while n != NULL {
            ids.push(node_id(a, n));
            n = cpel_next(a, n);
        }
        cs.push((ci.name, ci.seen_time_ms, ids));
    }
    LoadedGroup {
        name: gi.name,
        last_id: gi.last_id,
        entries_read: gi.entries_read,
        pel,
        consumers: cs,
    }
}

// ---- image validation --------------------------------------------------------------------

/// Checks a chain of one skiplist: at every level, the chain holds exactly the nodes of
/// `members` (node → level) whose level is above it, in ascending ID order. Following
/// such chains can neither loop nor leave the nodes already claimed.
fn check_chain(
    a: &Arena,
    head: Ref,
    chain: Chain,
    members: &HashMap<Ref, usize>,
) -> Result<(), Corrupt> {
    for l in 0..MAX_LEVEL {
        let want = members.values().filter(|&&lv| lv > l).count();
        let mut got = 0usize;
        let mut prev: Option<Id> = None;
        let mut n = fwd(a, head, chain, l);
        while n != NULL {
            match members.get(&n) {
                Some(&lv) if lv > l => {}
                _ => return Err(Corrupt::at("stream PEL link", n)),
            }
            let id = node_id(a, n);
            if prev.is_some_and(|p| p >= id) {
                return Err(Corrupt::at("stream PEL order", n));
            }
            prev = Some(id);
            got += 1;
            if got > want {
                return Err(Corrupt::at("stream PEL chain length", n));
            }
            n = fwd(a, n, chain, l);
        }
        if got != want {
            return Err(Corrupt::at("stream PEL chain length", head));
        }
    }
    Ok(())
}

fn claim_head(a: &Arena, claims: &mut Claims, h: Ref) -> Result<(), Corrupt> {
    claims.claim(h, HEAD_BYTES as u64, "stream PEL head")?;
    if level_of(a, h) != MAX_LEVEL {
        return Err(Corrupt::at("stream PEL head level", h));
    }
    Ok(())
}

/// Checks the groups of a stream value in an image and claims their blocks. `live` false
/// for a graveyard copy being freed: its consumers may already be gone while NACKs still
/// name them, so ownership and counts are not checked there.
pub fn validate(a: &Arena, claims: &mut Claims, first: Ref, live: bool) -> Result<(), Corrupt> {
    let mut g = first;
    let mut prev_name: Option<Vec<u8>> = None;
    while g != NULL {
        claims.peek(g, GROUP_FIXED as u64, "stream group")?;
        let gl = name_len(a, g);
        claims.claim(g, (GROUP_FIXED + gl) as u64, "stream group")?;
        let name = g_name(a, g).to_vec();
        if prev_name.as_ref().is_some_and(|p| *p >= name) {
            return Err(Corrupt::at("stream groups out of order", g));
        }
        prev_name = Some(name);
        let head = g_pel(a, g);
        claims.peek(head, HEAD_BYTES as u64, "stream PEL head")?;
        claim_head(a, claims, head)?;
        // The consumers.
        let mut owners: HashMap<Ref, (Ref, u64)> = HashMap::new();
        let mut c = g_consumers(a, g);
        let mut prev_c: Option<Vec<u8>> = None;
        while c != NULL {
            claims.peek(c, CONSUMER_FIXED as u64, "stream consumer")?;
            let cl = name_len(a, c);
            claims.claim(c, (CONSUMER_FIXED + cl) as u64, "stream consumer")?;
            let cname = consumer_name(a, c).to_vec();
            if prev_c.as_ref().is_some_and(|p| *p >= cname) {
                return Err(Corrupt::at("stream consumers out of order", c));
            }
            prev_c = Some(cname);
            let ch = c_pel(a, c);
            claims.peek(ch, HEAD_BYTES as u64, "stream PEL head")?;
            claim_head(a, claims, ch)?;
            owners.insert(c, (ch, 0));
            c = a.read_u32(c, 0);
        }
        if live && owners.len() as u64 != a.read_u64(g, 48) {
            return Err(Corrupt::at("stream consumer count", g));
        }
        // The group PEL, level 0 first: every node claimed once, IDs ascending.
        let mut members: HashMap<Ref, usize> = HashMap::new();
        let mut by_consumer: HashMap<Ref, HashMap<Ref, usize>> = HashMap::new();
        let mut n = fwd(a, head, Chain::Group, 0);
        let mut prev: Option<Id> = None;
        while n != NULL {
            claims.peek(n, NODE_FIXED as u64, "stream NACK")?;
            let lv = level_of(a, n);
            if lv == 0 || lv > MAX_LEVEL {
                return Err(Corrupt::at("stream NACK level", n));
            }
            claims.claim(n, node_bytes(lv) as u64, "stream NACK")?;
            let id = node_id(a, n);
            if prev.is_some_and(|p| p >= id) {
                return Err(Corrupt::at("stream PEL order", n));
            }
            prev = Some(id);
            members.insert(n, lv);
            let owner = a.read_u32(n, 32);
            match owners.get_mut(&owner) {
                Some(o) => {
                    o.1 += 1;
                    by_consumer.entry(owner).or_default().insert(n, lv);
                }
                None if live => return Err(Corrupt::at("stream NACK consumer", n)),
                None => {}
            }
            n = fwd(a, n, Chain::Group, 0);
        }
        if live && members.len() as u64 != a.read_u64(g, 40) {
            return Err(Corrupt::at("stream PEL count", g));
        }
        check_chain(a, head, Chain::Group, &members)?;
        let empty = HashMap::new();
        for (c, (ch, count)) in &owners {
            if live && *count != a.read_u64(*c, 24) {
                return Err(Corrupt::at("stream consumer PEL count", *c));
            }
            check_chain(
                a,
                *ch,
                Chain::Consumer,
                by_consumer.get(c).unwrap_or(&empty),
            )?;
        }
        g = g_next(a, g);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arena() -> Arena {
        Arena::new(64 << 20, [1, 2]).unwrap()
    }

    fn ids(a: &Arena, g: Ref) -> Vec<u64> {
        let mut v = vec![];
        let mut n = pel_seek(a, g, Id::MIN);
        while n != NULL {
            v.push(nack(a, n).id.ms);
            n = pel_next(a, n);
        }
        v
    }

    #[test]
    fn pel_add_remove_assign_and_walks() {
        let mut a = arena();
        let mut first = NULL;
        let g = create_group(&mut a, &mut first, b"g2", Id::MIN, 0).unwrap();
        assert!(create_group(&mut a, &mut first, b"g2", Id::MIN, 0).is_none());
        create_group(&mut a, &mut first, b"g1", Id::MIN, 0).unwrap();
        let names: Vec<Vec<u8>> = groups(&a, first)
            .iter()
            .map(|&g| group(&a, g).name)
            .collect();
        assert_eq!(names, [b"g1".to_vec(), b"g2".to_vec()]);
        let c1 = create_consumer(&mut a, g, b"bob", 5).unwrap();
        let c2 = create_consumer(&mut a, g, b"alice", 5).unwrap();
        // Insert out of order, many, to reach higher levels.
        for ms in (1..=400u64).rev() {
            let c = if ms % 2 == 0 { c1 } else { c2 };
            pel_add(&mut a, g, c, Id::new(ms, 0), 1, 1);
        }
        assert_eq!(ids(&a, g), (1..=400).collect::<Vec<_>>());
        assert_eq!(nack(&a, pel_last(&a, g)).id.ms, 400);
        assert!(validate(&a, &mut Claims::new(&a), first, true).is_ok());
        for ms in (1..=400u64).step_by(3) {
            assert!(pel_remove(&mut a, g, Id::new(ms, 0)));
            assert!(!pel_remove(&mut a, g, Id::new(ms, 0)));
        }
        let n = pel_find(&a, g, Id::new(2, 0)).unwrap();
        pel_assign(&mut a, n, c2);
        assert_eq!(nack(&a, n).consumer, c2);
        assert_eq!(nack(&a, cpel_seek(&a, c2, Id::MIN)).id.ms, 2);
        assert!(validate(&a, &mut Claims::new(&a), first, true).is_ok());
        let copy = clone(&mut a, first);
        assert_eq!(
            export(&a, find_group(&a, copy, b"g2").unwrap()),
            export(&a, g)
        );
        let pending = consumer(&a, c1).pel_count;
        assert_eq!(delete_consumer(&mut a, g, c1), pending);
        assert_eq!(group(&a, g).consumer_count, 1);
        assert!(ids(&a, g).iter().all(|ms| ms % 2 == 1 || *ms == 2));
        assert!(validate(&a, &mut Claims::new(&a), first, true).is_ok());
        // A damaged link is refused.
        let n = pel_seek(&a, g, Id::MIN);
        let saved = fwd(&a, n, Chain::Group, 0);
        set_fwd(&mut a, n, Chain::Group, 0, n);
        assert!(validate(&a, &mut Claims::new(&a), first, true).is_err());
        set_fwd(&mut a, n, Chain::Group, 0, saved);
        // Freed piecewise, as the lazy free does.
        let mut f = copy;
        while !free_some(&mut a, &mut f, 7).1 {
            assert!(validate(&a, &mut Claims::new(&a), f, false).is_ok());
        }
        free_all(&mut a, first);
    }

    /// Every byte of every block of a groups list changed in turn: validation refuses the
    /// damage, or what it accepts can be walked, edited and freed without a panic.
    #[test]
    fn damaged_blocks_are_refused_or_harmless() {
        let mut a = arena();
        let mut first = NULL;
        let g = create_group(&mut a, &mut first, b"g", Id::new(9, 0), 3).unwrap();
        create_group(&mut a, &mut first, b"h", Id::MIN, -1).unwrap();
        let c1 = create_consumer(&mut a, g, b"c1", 5).unwrap();
        let c2 = create_consumer(&mut a, g, b"c2", 6).unwrap();
        for ms in 1..=40u64 {
            pel_add(
                &mut a,
                g,
                if ms % 3 == 0 { c1 } else { c2 },
                Id::new(ms, 0),
                7,
                1,
            );
        }
        // Every block with its size.
        let mut blocks = vec![];
        for g in groups(&a, first) {
            blocks.push((g, GROUP_FIXED + name_len(&a, g)));
            blocks.push((g_pel(&a, g), HEAD_BYTES));
            for c in consumers(&a, g) {
                blocks.push((c, CONSUMER_FIXED + name_len(&a, c)));
                blocks.push((c_pel(&a, c), HEAD_BYTES));
            }
            let mut n = pel_seek(&a, g, Id::MIN);
            while n != NULL {
                blocks.push((n, node_bytes(level_of(&a, n))));
                n = pel_next(&a, n);
            }
        }
        let mut accepted = 0;
        for (r, size) in blocks {
            for off in 0..size {
                let old = a.bytes(r, off, 1)[0];
                for new in [old ^ 0xff, old.wrapping_add(1)] {
                    a.bytes_mut(r, off, 1)[0] = new;
                    if validate(&a, &mut Claims::new(&a), first, true).is_ok() {
                        accepted += 1;
                        // Everything that reads: the RDB export walks both chains of
                        // every PEL, lookups descend every level.
                        for g in groups(&a, first) {
                            let e = export(&a, g);
                            for (id, _, _) in &e.pel {
                                assert!(pel_find(&a, g, *id).is_some());
                            }
                            pel_last(&a, g);
                        }
                        bytes(&a, first);
                        block_count(&a, first);
                    }
                }
                a.bytes_mut(r, off, 1)[0] = old;
            }
        }
        // Times, counts of deliveries, names' bytes and the like are free-form.
        assert!(accepted > 0);
        // What a write does with a valid structure: removals and a consumer's deletion.
        assert!(pel_remove(&mut a, g, Id::new(5, 0)));
        assert_eq!(delete_consumer(&mut a, g, c1), 13);
        assert!(validate(&a, &mut Claims::new(&a), first, true).is_ok());
    }

    #[test]
    fn loaded_groups_are_checked() {
        let ok = LoadedGroup {
            name: b"g".to_vec(),
            pel: vec![(Id::new(1, 0), 0, 1), (Id::new(2, 0), 0, 1)],
            consumers: vec![(b"c".to_vec(), 0, vec![Id::new(1, 0), Id::new(2, 0)])],
            ..Default::default()
        };
        assert!(ok.check());
        let mut orphan = ok.clone();
        orphan.consumers[0].2.pop();
        assert!(!orphan.check());
        let mut unknown = ok.clone();
        unknown.consumers[0].2.push(Id::new(3, 0));
        assert!(!unknown.check());
        let mut twice = ok.clone();
        twice
            .consumers
            .push((b"d".to_vec(), 0, vec![Id::new(1, 0)]));
        assert!(!twice.check());
        let mut dup = ok;
        dup.pel.push((Id::new(2, 0), 0, 1));
        assert!(!dup.check());
    }
}
