//! Stream storage in the arena (Redis 7.0's stream type; its consumer groups are in
//! `stream_groups`).
//!
//! Entries live in **nodes**: arena blocks `[cap u32][pad u32][listpack]` whose listpack
//! is byte for byte what Redis keeps in a stream node, so RDB writes them as they are:
//!
//! * a master entry `count, deleted, num-fields, field_1 .. field_N, 0` (live entries,
//!   entries marked deleted, and the fields of the node's first entry);
//! * then per entry `flags, ms-diff, seq-diff, [num-fields, field_1,] value_1 .. , lp-count`,
//!   the ID as a difference from the node's master ID (the ID of its first entry), the
//!   fields left out when they are the master's (flag `SAMEFIELDS`), and `lp-count` the
//!   number of elements before it, so the node can be walked backwards. XDEL and trimming
//!   only set the `DELETED` flag; a node whose live count reaches 0 through XDEL goes.
//!
//! Redis indexes the nodes by their big-endian 128-bit master ID in a radix tree. Here the
//! index is an **ordered array** of `(master ID, node Ref)` slots (24 bytes each) in one
//! arena block, used as a deque: `[start, start + nodes)` are live, so appending a node
//! (XADD) and dropping the first ones (trimming) are O(1) amortised, and finding the node
//! holding an ID is a binary search, O(log n) as the tree's. Only removing a node in the
//! middle (XDEL emptying it) moves the slots after it, O(nodes): one 24-byte slot per
//! `stream-node-max-entries` entries (100 by default).
//!
//! The entry value (inline in the key's entry, [`HEADER_BYTES`]): `[tag 1][pad 3]
//! [index Ref][start u32][nodes u32][cap u32][groups Ref][length u64][last-id 16]
//! [first-id 16][max-deleted-id 16][entries-added u64]`. Everything the lazy free needs is
//! in the first 24 bytes (a value graveyard node keeps 56). `groups` is the first of the
//! stream's consumer groups (`stream_groups`), NULL when it has none.

use super::listpack::{self as lp, Val};
use crate::arena::validate::{Claims, Corrupt};
use crate::arena::{Arena, Ref, NULL};

/// The entry's encoding byte (Redis's OBJ_ENCODING_STREAM).
pub const ENC_STREAM: u8 = 10;
const TAG: u8 = 1;
pub const HEADER_BYTES: usize = 88;
/// Index slot: master ms u64, master seq u64, node Ref u32, pad.
const SLOT_BYTES: usize = 24;
/// Node block header before the listpack.
const NODE_HDR: usize = 8;

/// Redis's STREAM_ITEM_FLAG_*.
pub const FLAG_DELETED: i64 = 1;
pub const FLAG_SAMEFIELDS: i64 = 2;
/// Redis's STREAM_LISTPACK_MAX_SIZE: a node never grows past this.
pub const LISTPACK_MAX_BYTES: u64 = 1 << 30;

/// Longest `<ms>-<seq>` text: two 20-digit numbers and the dash.
pub const ID_TEXT_MAX: usize = 41;

/// A stream entry ID.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Id {
    pub ms: u64,
    pub seq: u64,
}

impl Id {
    pub const MIN: Id = Id { ms: 0, seq: 0 };
    pub const MAX: Id = Id {
        ms: u64::MAX,
        seq: u64::MAX,
    };
    pub fn new(ms: u64, seq: u64) -> Id {
        Id { ms, seq }
    }
    /// The next ID (None past the last one).
    pub fn incr(self) -> Option<Id> {
        if self.seq == u64::MAX {
            if self.ms == u64::MAX {
                return None;
            }
            return Some(Id::new(self.ms + 1, 0));
        }
        Some(Id::new(self.ms, self.seq + 1))
    }
    /// The previous ID (None before 0-0).
    pub fn decr(self) -> Option<Id> {
        if self.seq == 0 {
            if self.ms == 0 {
                return None;
            }
            return Some(Id::new(self.ms - 1, u64::MAX));
        }
        Some(Id::new(self.ms, self.seq - 1))
    }
    pub fn to_bytes(self) -> Vec<u8> {
        let mut buf = [0u8; ID_TEXT_MAX];
        self.text(&mut buf).to_vec()
    }
    /// `<ms>-<seq>` written into `buf` without allocating (a reply per XADD).
    pub fn text(self, buf: &mut [u8; ID_TEXT_MAX]) -> &[u8] {
        let mut d = [0u8; 20];
        let ms = crate::util::fmt_u64(self.ms, &mut d);
        let n = ms.len();
        buf[..n].copy_from_slice(ms);
        buf[n] = b'-';
        let seq = crate::util::fmt_u64(self.seq, &mut d);
        buf[n + 1..n + 1 + seq.len()].copy_from_slice(seq);
        &buf[..n + 1 + seq.len()]
    }
    /// Redis's node key: the ID as a 128-bit big-endian number.
    pub fn to_be(self) -> [u8; 16] {
        let mut k = [0u8; 16];
        k[..8].copy_from_slice(&self.ms.to_be_bytes());
        k[8..].copy_from_slice(&self.seq.to_be_bytes());
        k
    }
    pub fn from_be(k: &[u8; 16]) -> Id {
        let mut ms = [0u8; 8];
        let mut seq = [0u8; 8];
        ms.copy_from_slice(&k[..8]);
        seq.copy_from_slice(&k[8..]);
        Id::new(u64::from_be_bytes(ms), u64::from_be_bytes(seq))
    }
}

/// The stream's header (the entry value), decoded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Meta {
    index: Ref,
    start: u32,
    pub nodes: u32,
    cap: u32,
    /// The consumer groups list (`stream_groups`), NULL when there is none.
    pub groups: Ref,
    pub length: u64,
    pub last_id: Id,
    pub first_id: Id,
    pub max_deleted_id: Id,
    pub entries_added: u64,
}

fn rd64(v: &[u8], o: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&v[o..o + 8]);
    u64::from_le_bytes(b)
}
fn rd32(v: &[u8], o: usize) -> u32 {
    let mut b = [0u8; 4];
    b.copy_from_slice(&v[o..o + 4]);
    u32::from_le_bytes(b)
}

impl Meta {
    /// Decodes a stream value. Needs the first 24 bytes (a graveyard copy) at least; the
    /// rest reads as zero when absent.
    pub fn read(v: &[u8]) -> Meta {
        let mut full = [0u8; HEADER_BYTES];
        let n = v.len().min(HEADER_BYTES);
        full[..n].copy_from_slice(&v[..n]);
        let v = &full;
        Meta {
            index: rd32(v, 4),
            start: rd32(v, 8),
            nodes: rd32(v, 12),
            cap: rd32(v, 16),
            groups: rd32(v, 20),
            length: rd64(v, 24),
            last_id: Id::new(rd64(v, 32), rd64(v, 40)),
            first_id: Id::new(rd64(v, 48), rd64(v, 56)),
            max_deleted_id: Id::new(rd64(v, 64), rd64(v, 72)),
            entries_added: rd64(v, 80),
        }
    }
    pub fn encode(&self) -> [u8; HEADER_BYTES] {
        let mut v = [0u8; HEADER_BYTES];
        v[0] = TAG;
        v[4..8].copy_from_slice(&self.index.to_le_bytes());
        v[8..12].copy_from_slice(&self.start.to_le_bytes());
        v[12..16].copy_from_slice(&self.nodes.to_le_bytes());
        v[16..20].copy_from_slice(&self.cap.to_le_bytes());
        v[20..24].copy_from_slice(&self.groups.to_le_bytes());
        let mut put = |o: usize, x: u64| v[o..o + 8].copy_from_slice(&x.to_le_bytes());
        put(24, self.length);
        put(32, self.last_id.ms);
        put(40, self.last_id.seq);
        put(48, self.first_id.ms);
        put(56, self.first_id.seq);
        put(64, self.max_deleted_id.ms);
        put(72, self.max_deleted_id.seq);
        put(80, self.entries_added);
        v
    }
}

/// Node limits from the config (`stream-node-max-bytes`, `stream-node-max-entries`).
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub max_bytes: u64,
    pub max_entries: u64,
}

impl Limits {
    pub fn from_config(c: &crate::config::Config) -> Limits {
        let s = c.settings();
        Limits {
            max_bytes: s.stream_node_max_bytes,
            max_entries: s.stream_node_max_entries,
        }
    }
}

// ---- index -------------------------------------------------------------------------------

fn slot_off(m: &Meta, i: u32) -> usize {
    (m.start + i) as usize * SLOT_BYTES
}

/// Master ID and node of the `i`-th node.
pub fn node_at(a: &Arena, m: &Meta, i: u32) -> (Id, Ref) {
    let o = slot_off(m, i);
    let b = a.bytes(m.index, o, SLOT_BYTES);
    (Id::new(rd64(b, 0), rd64(b, 8)), rd32(b, 16))
}

fn set_slot(a: &mut Arena, m: &Meta, i: u32, id: Id, node: Ref) {
    let o = slot_off(m, i);
    let b = a.bytes_mut(m.index, o, SLOT_BYTES);
    b[0..8].copy_from_slice(&id.ms.to_le_bytes());
    b[8..16].copy_from_slice(&id.seq.to_le_bytes());
    b[16..20].copy_from_slice(&node.to_le_bytes());
    b[20..24].fill(0);
}

fn push_slot(a: &mut Arena, m: &mut Meta, id: Id, node: Ref) {
    if m.start + m.nodes == m.cap {
        if m.start > 0 && m.nodes <= m.cap / 2 {
            // Slide the live slots to the front instead of growing.
            let from = m.start as usize * SLOT_BYTES;
            let len = m.nodes as usize * SLOT_BYTES;
            a.copy_within(m.index, from, m.index, 0, len);
            m.start = 0;
        } else {
            let new_cap = (m.cap * 2).max(4);
            let r = a.alloc(new_cap as usize * SLOT_BYTES);
            if m.index != NULL {
                let from = m.start as usize * SLOT_BYTES;
                a.copy_within(m.index, from, r, 0, m.nodes as usize * SLOT_BYTES);
                a.free(m.index, m.cap as usize * SLOT_BYTES);
            }
            m.index = r;
            m.cap = new_cap;
            m.start = 0;
        }
    }
    m.nodes += 1;
    set_slot(a, m, m.nodes - 1, id, node);
}

/// Frees node `i` and removes its slot.
fn remove_node(a: &mut Arena, m: &mut Meta, i: u32) {
    let (_, node) = node_at(a, m, i);
    free_node(a, node);
    if i == 0 {
        m.start += 1;
    } else if i + 1 < m.nodes {
        let from = slot_off(m, i + 1);
        let len = (m.nodes - i - 1) as usize * SLOT_BYTES;
        a.copy_within(m.index, from, m.index, slot_off(m, i), len);
    }
    m.nodes -= 1;
    if m.nodes == 0 {
        a.free(m.index, m.cap as usize * SLOT_BYTES);
        m.index = NULL;
        m.cap = 0;
        m.start = 0;
    }
}

/// The last node whose master ID is at most `id` (None: `id` is before every node).
fn find_le(a: &Arena, m: &Meta, id: Id) -> Option<u32> {
    let (mut lo, mut hi) = (0u32, m.nodes);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if node_at(a, m, mid).0 <= id {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo.checked_sub(1)
}

// ---- nodes -------------------------------------------------------------------------------

fn node_cap(a: &Arena, node: Ref) -> usize {
    a.read_u32(node, 0) as usize
}

/// A node's listpack.
pub fn node_lp(a: &Arena, node: Ref) -> &[u8] {
    let total = lp::total(a.bytes(node, NODE_HDR, 4));
    a.bytes(node, NODE_HDR, total)
}

fn new_node(a: &mut Arena, bytes: &[u8]) -> Ref {
    let cap = bytes.len().next_multiple_of(8);
    let r = a.alloc(NODE_HDR + cap);
    a.write_u32(r, 0, cap as u32);
    a.write_u32(r, 4, 0);
    a.bytes_mut(r, NODE_HDR, bytes.len()).copy_from_slice(bytes);
    r
}

fn free_node(a: &mut Arena, node: Ref) {
    let cap = node_cap(a, node);
    a.free(node, NODE_HDR + cap);
}

/// Stores a rewritten listpack in `node` (in place when it fits, else in a bigger block
/// with half again as much room, so a run of appends copies O(1) times per byte).
fn store_node(a: &mut Arena, node: Ref, bytes: &[u8]) -> Ref {
    let cap = node_cap(a, node);
    if bytes.len() <= cap {
        a.bytes_mut(node, NODE_HDR, bytes.len())
            .copy_from_slice(bytes);
        return node;
    }
    let new_cap = bytes.len().max(cap + cap / 2).next_multiple_of(8);
    let r = a.alloc(NODE_HDR + new_cap);
    a.write_u32(r, 0, new_cap as u32);
    a.write_u32(r, 4, 0);
    a.bytes_mut(r, NODE_HDR, bytes.len()).copy_from_slice(bytes);
    a.free(node, NODE_HDR + cap);
    r
}

/// A tail node that will take no more appends gives back the room it grew into (up to
/// half its bytes, see [`store_node`]): appends only ever go to the last node, so a full
/// one changes again only by deletes and trims, which never grow it.
fn seal_node(a: &mut Arena, m: &Meta, master: Id, node: Ref) {
    let cap = node_cap(a, node);
    let len = lp::total(a.bytes(node, NODE_HDR, 4));
    if cap - len < SEAL_MIN_SLACK_BYTES {
        return;
    }
    let new_cap = len.next_multiple_of(8);
    let r = a.alloc(NODE_HDR + new_cap);
    a.write_u32(r, 0, new_cap as u32);
    a.write_u32(r, 4, 0);
    a.copy_within(node, NODE_HDR, r, NODE_HDR, len);
    a.free(node, NODE_HDR + cap);
    set_slot(a, m, m.nodes - 1, master, r);
}

/// Less slack than this is not worth a copy of the node.
const SEAL_MIN_SLACK_BYTES: usize = 64;

fn int_of(v: Val) -> Option<i64> {
    match v {
        Val::Int(i) => Some(i),
        Val::Str(s) => crate::util::parse_i64(s),
    }
}

fn push_int(v: &mut Vec<u8>, i: i64) {
    let end = v.len() - 1;
    let mut digits = [0u8; 20];
    lp::push_vec(v, end, crate::util::fmt_i64(i, &mut digits));
}
fn push_bytes(v: &mut Vec<u8>, s: &[u8]) {
    let end = v.len() - 1;
    lp::push_vec(v, end, s);
}
/// Replaces the element at `off` by integer `i` (the listpack may change size).
fn replace_int(v: &mut Vec<u8>, off: usize, i: i64) {
    let mut digits = [0u8; 20];
    let text = crate::util::fmt_i64(i, &mut digits);
    if lp::overwrite_same_size(v, off, text) {
        return;
    }
    let n = lp::delete_in_place(v, off);
    v.truncate(v.len() - n);
    lp::push_vec(v, off, text);
}

/// One entry of a node, located.
#[derive(Clone, Debug)]
pub struct EntryPos {
    pub id: Id,
    pub flags: i64,
    flags_off: usize,
    /// Offset of the first field (or value when SAMEFIELDS).
    body_off: usize,
    pub num_fields: usize,
}

impl EntryPos {
    pub fn deleted(&self) -> bool {
        self.flags & FLAG_DELETED != 0
    }
}

/// A node parsed: its counters, the master fields and every entry (deleted ones too).
pub struct NodeView {
    pub count: i64,
    pub deleted: i64,
    master_fields: Vec<usize>,
    pub entries: Vec<EntryPos>,
}

/// Parses (and checks) a node's listpack whose master ID is `master`. None when it is
/// not a well-formed stream node: the elements must be as Redis's
/// streamValidateListpackIntegrity requires, IDs strictly increasing from `master`, the
/// counters equal to the live and deleted entries. Every offset in the result is an
/// element start, so readers never leave the listpack.
pub fn parse_node(l: &[u8], master: Id) -> Option<NodeView> {
    let mut p = lp::first(l);
    fn step(l: &[u8], p: &mut Option<usize>) -> Option<usize> {
        let o = (*p)?;
        *p = lp::next(l, o);
        Some(o)
    }
    macro_rules! take {
        () => {
            step(l, &mut p)
        };
    }
    let count_off = take!()?;
    let count = int_of(lp::get(l, count_off))?;
    let deleted = int_of(lp::get(l, take!()?))?;
    let nf = int_of(lp::get(l, take!()?))?;
    if nf < 0 || count < 0 || deleted < 0 || nf as usize > l.len() {
        return None;
    }
    let mut master_fields = Vec::with_capacity(nf as usize);
    for _ in 0..nf {
        master_fields.push(take!()?);
    }
    if int_of(lp::get(l, take!()?))? != 0 {
        return None;
    }
    let mut entries = Vec::new();
    let (mut live, mut dead) = (0i64, 0i64);
    let mut prev: Option<Id> = None;
    while p.is_some() {
        let flags_off = take!()?;
        let flags = int_of(lp::get(l, flags_off))?;
        if !(0..=3).contains(&flags) {
            return None;
        }
        let msd = int_of(lp::get(l, take!()?))?;
        let seqd = int_of(lp::get(l, take!()?))?;
        let id = Id::new(
            master.ms.wrapping_add(msd as u64),
            master.seq.wrapping_add(seqd as u64),
        );
        if id < master || prev.is_some_and(|q| id <= q) {
            return None;
        }
        prev = Some(id);
        let same = flags & FLAG_SAMEFIELDS != 0;
        let (n, elems) = if same {
            (nf as usize, nf as usize)
        } else {
            let n = int_of(lp::get(l, take!()?))?;
            if n < 0 || n as usize > l.len() {
                return None;
            }
            (n as usize, 2 * n as usize)
        };
        let body_off = p.unwrap_or(0);
        for _ in 0..elems {
            take!()?;
        }
        let want = if same {
            elems as i64 + 3
        } else {
            elems as i64 + 4
        };
        if int_of(lp::get(l, take!()?))? != want {
            return None;
        }
        if flags & FLAG_DELETED != 0 {
            dead += 1;
        } else {
            live += 1;
        }
        entries.push(EntryPos {
            id,
            flags,
            flags_off,
            body_off,
            num_fields: n,
        });
    }
    if live != count || dead != deleted || entries.is_empty() || entries[0].id != master {
        return None;
    }
    Some(NodeView {
        count,
        deleted,
        master_fields,
        entries,
    })
}

/// Walks a stored node's entries in order, deleted ones too, until `f` returns false
/// (then returns false). Unlike [`parse_node`] it neither checks the node (it was checked
/// when stored or loaded; a malformed element just ends the walk) nor collects the
/// entries: a read that wants a few entries stops stepping where they end. The view
/// passed to `f` has the node's counters and master fields, no entries.
pub fn walk_node(l: &[u8], master: Id, mut f: impl FnMut(&NodeView, &EntryPos) -> bool) -> bool {
    /// Steps through the listpack's elements.
    struct Cursor<'a> {
        l: &'a [u8],
        p: Option<usize>,
    }
    impl Cursor<'_> {
        fn take(&mut self) -> Option<usize> {
            let o = self.p?;
            self.p = lp::next(self.l, o);
            Some(o)
        }
        fn int(&mut self) -> Option<i64> {
            let o = self.take()?;
            int_of(lp::get(self.l, o))
        }
    }
    let mut c = Cursor { l, p: lp::first(l) };
    let head = |c: &mut Cursor| -> Option<NodeView> {
        let count = c.int()?;
        let deleted = c.int()?;
        let nf = usize::try_from(c.int()?).ok()?;
        let mut master_fields = Vec::with_capacity(nf.min(l.len()));
        for _ in 0..nf {
            master_fields.push(c.take()?);
        }
        c.take()?; // the master entry's terminating 0
        Some(NodeView {
            count,
            deleted,
            master_fields,
            entries: Vec::new(),
        })
    };
    let Some(view) = head(&mut c) else {
        return true;
    };
    let entry = |c: &mut Cursor| -> Option<EntryPos> {
        let flags_off = c.take()?;
        let flags = int_of(lp::get(l, flags_off))?;
        let msd = c.int()?;
        let seqd = c.int()?;
        let same = flags & FLAG_SAMEFIELDS != 0;
        let (n, elems) = if same {
            (view.master_fields.len(), view.master_fields.len())
        } else {
            let n = usize::try_from(c.int()?).ok()?;
            (n, n.checked_mul(2)?)
        };
        let body_off = c.p.unwrap_or(0);
        for _ in 0..elems {
            c.take()?;
        }
        c.take()?; // lp-count
        Some(EntryPos {
            id: Id::new(
                master.ms.wrapping_add(msd as u64),
                master.seq.wrapping_add(seqd as u64),
            ),
            flags,
            flags_off,
            body_off,
            num_fields: n,
        })
    };
    while let Some(e) = entry(&mut c) {
        if !f(&view, &e) {
            return false;
        }
    }
    true
}

/// Walks a stored node's entries from the last to the first, deleted ones too, giving
/// each one's ID and flags until `f` returns false (then returns false). Each entry's
/// trailing `lp-count` says how many elements to step back to its flags, so an entry
/// near the end costs a few steps instead of a walk over the whole node (Redis's reverse
/// stream iterator does the same). Unchecked like [`walk_node`]: a malformed element
/// ends the walk.
pub fn walk_node_rev(l: &[u8], master: Id, mut f: impl FnMut(Id, i64) -> bool) -> bool {
    let int_at = |o: usize| int_of(lp::get(l, o));
    // The first entry starts after the master entry: count, deleted, num-fields, the
    // fields, and its terminating 0.
    let first_entry = (|| {
        let mut p = lp::first(l)?;
        p = lp::next(l, p)?;
        p = lp::next(l, p)?;
        let nf = usize::try_from(int_at(p)?).ok()?;
        for _ in 0..nf.checked_add(2)? {
            p = lp::next(l, p)?;
        }
        Some(p)
    })();
    let Some(first_entry) = first_entry else {
        return true;
    };
    let mut p = lp::last(l);
    while let Some(count_off) = p {
        if count_off <= first_entry {
            break;
        }
        let Some(back) = int_at(count_off).and_then(|n| usize::try_from(n).ok()) else {
            break;
        };
        let mut flags_off = Some(count_off);
        for _ in 0..back {
            flags_off = flags_off.and_then(|o| lp::prev(l, o));
            if flags_off.is_none_or(|o| o < first_entry) {
                return true;
            }
        }
        let Some(flags_off) = flags_off else {
            break;
        };
        let fields = (|| {
            let flags = int_at(flags_off)?;
            let ms_off = lp::next(l, flags_off)?;
            let msd = int_at(ms_off)?;
            let seqd = int_at(lp::next(l, ms_off)?)?;
            Some((flags, msd, seqd))
        })();
        let Some((flags, msd, seqd)) = fields else {
            break;
        };
        let id = Id::new(
            master.ms.wrapping_add(msd as u64),
            master.seq.wrapping_add(seqd as u64),
        );
        if !f(id, flags) {
            return false;
        }
        if flags_off == first_entry {
            break;
        }
        p = lp::prev(l, flags_off);
    }
    true
}

/// An entry's field/value pairs.
pub fn entry_pairs(l: &[u8], view: &NodeView, e: &EntryPos) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::with_capacity(e.num_fields);
    let mut p = Some(e.body_off);
    let same = e.flags & FLAG_SAMEFIELDS != 0;
    for i in 0..e.num_fields {
        let field = if same {
            lp::get(l, view.master_fields[i]).to_vec()
        } else {
            let o = p.unwrap_or(0);
            p = lp::next(l, o);
            lp::get(l, o).to_vec()
        };
        let o = p.unwrap_or(0);
        p = lp::next(l, o);
        out.push((field, lp::get(l, o).to_vec()));
    }
    out
}

/// A node read from a live stream (validated when it was stored or loaded).
fn view_of(a: &Arena, m: &Meta, i: u32) -> (Id, Ref, NodeView) {
    let (master, node) = node_at(a, m, i);
    let view = parse_node(node_lp(a, node), master).unwrap_or(NodeView {
        count: 0,
        deleted: 0,
        master_fields: vec![],
        entries: vec![],
    });
    (master, node, view)
}

// ---- operations --------------------------------------------------------------------------

/// A new, empty stream's value bytes.
pub fn empty_value() -> [u8; HEADER_BYTES] {
    Meta::default().encode()
}

pub fn is_stream(v: &[u8]) -> bool {
    v.len() == HEADER_BYTES && v[0] == TAG
}

/// Appends an entry with `id` (already checked greater than the last ID) and `pairs`
/// (field, value, field, value...). Updates length, last ID, first ID, entries added.
pub fn append(a: &mut Arena, m: &mut Meta, id: Id, pairs: &[&[u8]], limits: Limits) {
    let totelelen: u64 = pairs.iter().map(|s| s.len() as u64).sum();
    let max_bytes = if limits.max_bytes == 0 || limits.max_bytes > LISTPACK_MAX_BYTES {
        LISTPACK_MAX_BYTES
    } else {
        limits.max_bytes
    };
    if m.nodes > 0 {
        let (master, node) = node_at(a, m, m.nodes - 1);
        let l = node_lp(a, node);
        let mut full = l.len() as u64 + totelelen >= max_bytes;
        if !full && limits.max_entries > 0 {
            let mut it = lp::iter(l);
            let c = it.next().and_then(int_of).unwrap_or(0);
            let d = it.next().and_then(int_of).unwrap_or(0);
            full = (c + d) as u64 >= limits.max_entries;
        }
        if !full {
            append_to_tail(a, m, master, node, id, pairs);
        } else {
            seal_node(a, m, master, node);
            append_new_node(a, m, id, pairs);
        }
    } else {
        append_new_node(a, m, id, pairs);
    }
    m.length += 1;
    m.entries_added += 1;
    m.last_id = id;
    if m.length == 1 {
        m.first_id = id;
    }
}

/// Starts a node holding only the entry `id`: its fields become the node's master fields.
fn append_new_node(a: &mut Arena, m: &mut Meta, id: Id, pairs: &[&[u8]]) {
    let numfields = pairs.len() / 2;
    let mut v = lp::empty();
    push_int(&mut v, 1);
    push_int(&mut v, 0);
    push_int(&mut v, numfields as i64);
    for f in pairs.iter().step_by(2) {
        push_bytes(&mut v, f);
    }
    push_int(&mut v, 0);
    push_int(&mut v, FLAG_SAMEFIELDS);
    push_int(&mut v, 0);
    push_int(&mut v, 0);
    for pair in pairs.chunks(2) {
        push_bytes(&mut v, pair[1]);
    }
    push_int(&mut v, numfields as i64 + 3);
    let r = new_node(a, &v);
    push_slot(a, m, id, r);
}

/// Appends entry `id` to the tail node in place: the node's count is rewritten and the
/// entry's elements written before the terminator, inside the node's block (grown first
/// when it lacks the room). Copying the whole node out and back, as a rebuild would, made
/// an append cost the node's size instead of the entry's.
fn append_to_tail(a: &mut Arena, m: &Meta, master: Id, node: Ref, id: Id, pairs: &[&[u8]]) {
    let numfields = pairs.len() / 2;
    let l = node_lp(a, node);
    let old_total = l.len();
    // The node's head: count, deleted, master field count, master fields.
    let count_off = lp::first(l);
    let count = count_off.and_then(|o| int_of(lp::get(l, o)));
    let mut same = false;
    if count.is_some() {
        let mut it = lp::iter(l).skip(2);
        let mnf = it.next().and_then(int_of).unwrap_or(-1);
        same = mnf == numfields as i64
            && pairs
                .iter()
                .step_by(2)
                .zip(it)
                .all(|(f, mf)| mf.eq_bytes(f));
    }
    let flags = if same { FLAG_SAMEFIELDS } else { 0 };
    let mut lp_count = numfields as i64 + 3;
    if !same {
        lp_count += numfields as i64 + 1;
    }
    let (mut d_count, mut d_flags, mut d_ms, mut d_seq, mut d_nf, mut d_lp) = (
        [0u8; 20], [0u8; 20], [0u8; 20], [0u8; 20], [0u8; 20], [0u8; 20],
    );
    let count_text = count.map(|c| crate::util::fmt_i64(c + 1, &mut d_count));
    let flags_text = crate::util::fmt_i64(flags, &mut d_flags);
    let ms_text = crate::util::fmt_i64(id.ms.wrapping_sub(master.ms) as i64, &mut d_ms);
    let seq_text = crate::util::fmt_i64(id.seq.wrapping_sub(master.seq) as i64, &mut d_seq);
    let nf_text = crate::util::fmt_i64(numfields as i64, &mut d_nf);
    let lp_count_text = crate::util::fmt_i64(lp_count, &mut d_lp);
    // The entry's elements in order; visited once to size the node, once to write them.
    let entry = |f: &mut dyn FnMut(&[u8])| {
        f(flags_text);
        f(ms_text);
        f(seq_text);
        if !same {
            f(nf_text);
        }
        for pair in pairs.chunks(2) {
            if !same {
                f(pair[0]);
            }
            f(pair[1]);
        }
        f(lp_count_text);
    };
    // Bytes the node grows by: the entry's elements, and the count when its encoding grows.
    let mut grow = 0;
    entry(&mut |s| grow += lp::entry_len(s));
    if let (Some(off), Some(text)) = (count_off, count_text) {
        grow += lp::entry_len(text).saturating_sub(lp::size_at(l, off));
    }
    let need = old_total + grow;
    let node = reserve_node(a, m, master, node, need);
    let cap = node_cap(a, node);
    let buf = a.bytes_mut(node, NODE_HDR, cap);
    if let (Some(off), Some(text)) = (count_off, count_text) {
        if !lp::overwrite_same_size(buf, off, text) {
            lp::delete_in_place(buf, off);
            lp::insert_in_place(buf, off, text);
        }
    }
    entry(&mut |s| {
        let end = lp::total(buf) - 1;
        lp::insert_in_place(buf, end, s);
    });
    debug_assert!(lp::total(buf) <= need);
}

/// The tail node's block with room for a listpack of `need` bytes: the same block when it
/// has it, else a block half again as big (or `need`) holding a copy, recorded in the index.
fn reserve_node(a: &mut Arena, m: &Meta, master: Id, node: Ref, need: usize) -> Ref {
    let cap = node_cap(a, node);
    if need <= cap {
        return node;
    }
    let len = lp::total(a.bytes(node, NODE_HDR, 4));
    let new_cap = need.max(cap + cap / 2).next_multiple_of(8);
    let r = a.alloc(NODE_HDR + new_cap);
    a.write_u32(r, 0, new_cap as u32);
    a.write_u32(r, 4, 0);
    a.copy_within(node, NODE_HDR, r, NODE_HDR, len);
    a.free(node, NODE_HDR + cap);
    set_slot(a, m, m.nodes - 1, master, r);
    r
}

/// An upper bound of the arena an [`append`] of `elems_bytes` of fields and values may
/// allocate: the tail node moved to a block half again as big, a new node, the index
/// grown to twice its slots.
pub fn append_room_bytes(a: &Arena, m: &Meta, elems_bytes: u64) -> u64 {
    let tail = if m.nodes > 0 {
        let (_, node) = node_at(a, m, m.nodes - 1);
        node_cap(a, node) as u64
    } else {
        0
    };
    tail + tail / 2 + 2 * elems_bytes + 128 + 2 * (m.cap as u64 + 4) * SLOT_BYTES as u64
}

/// Visits live entries with IDs in `[start, end]` in order (descending when `rev`) until
/// `f` returns false.
pub fn range(
    a: &Arena,
    m: &Meta,
    start: Id,
    end: Id,
    rev: bool,
    mut f: impl FnMut(Id, Vec<(Vec<u8>, Vec<u8>)>) -> bool,
) {
    if m.nodes == 0 || start > end {
        return;
    }
    if !rev {
        let mut i = find_le(a, m, start).unwrap_or(0);
        while i < m.nodes {
            let (master, node) = node_at(a, m, i);
            if master > end {
                return;
            }
            let l = node_lp(a, node);
            let walked_all = walk_node(l, master, |view, e| {
                if e.deleted() || e.id < start {
                    return true;
                }
                e.id <= end && f(e.id, entry_pairs(l, view, e))
            });
            if !walked_all {
                return;
            }
            i += 1;
        }
    } else {
        let Some(mut i) = find_le(a, m, end) else {
            return;
        };
        loop {
            let (_, node, view) = view_of(a, m, i);
            let l = node_lp(a, node);
            for e in view.entries.iter().rev() {
                if e.deleted() || e.id > end {
                    continue;
                }
                if e.id < start || !f(e.id, entry_pairs(l, &view, e)) {
                    return;
                }
            }
            if i == 0 {
                return;
            }
            i -= 1;
        }
    }
}

/// The first (or last) entry's ID, tombstones included or not (Redis's streamGetEdgeID:
/// with no entry, the first is `MAX` and the last `MIN`).
pub fn edge_id(a: &Arena, m: &Meta, first: bool, skip_tombstones: bool) -> Id {
    if !first {
        for i in (0..m.nodes).rev() {
            let (master, node) = node_at(a, m, i);
            let mut found = None;
            walk_node_rev(node_lp(a, node), master, |id, flags| {
                if !skip_tombstones || flags & FLAG_DELETED == 0 {
                    found = Some(id);
                }
                found.is_none()
            });
            if let Some(id) = found {
                return id;
            }
        }
        return Id::MIN;
    }
    for i in 0..m.nodes {
        let (master, node) = node_at(a, m, i);
        let mut found = None;
        walk_node(node_lp(a, node), master, |_, e| {
            if !skip_tombstones || !e.deleted() {
                found = Some(e.id);
            }
            found.is_none()
        });
        if let Some(id) = found {
            return id;
        }
    }
    Id::MAX
}

/// The last live entry's ID (Redis's streamLastValidID): `MIN` when there is none.
pub fn last_valid_id(a: &Arena, m: &Meta) -> Id {
    edge_id(a, m, false, true)
}

/// XDEL of one ID: true when a live entry had it.
pub fn delete(a: &mut Arena, m: &mut Meta, id: Id) -> bool {
    let Some(i) = find_le(a, m, id) else {
        return false;
    };
    let (master, node, view) = view_of(a, m, i);
    let Some(e) = view.entries.iter().find(|e| e.id == id && !e.deleted()) else {
        return false;
    };
    if view.count == 1 {
        remove_node(a, m, i);
    } else {
        let mut v = node_lp(a, node).to_vec();
        // Flags 0..3 are one-byte integers: set in place, offsets unchanged.
        replace_int(&mut v, e.flags_off, e.flags | FLAG_DELETED);
        bump_counters(&mut v, -1, 1);
        let r = store_node(a, node, &v);
        if r != node {
            set_slot(a, m, i, master, r);
        }
    }
    m.length -= 1;
    true
}

/// Adds to a node's live and deleted counters.
fn bump_counters(v: &mut Vec<u8>, d_count: i64, d_deleted: i64) {
    let Some(c_off) = lp::first(v) else { return };
    let c = int_of(lp::get(v, c_off)).unwrap_or(0);
    replace_int(v, c_off, c + d_count);
    let Some(d_off) = lp::next(v, c_off) else {
        return;
    };
    let d = int_of(lp::get(v, d_off)).unwrap_or(0);
    replace_int(v, d_off, d + d_deleted);
}

/// How to trim (Redis's streamAddTrimArgs, without the parsing).
#[derive(Clone, Copy, Debug)]
pub enum Trim {
    MaxLen(u64),
    MinId(Id),
}

/// Redis's streamTrim: whole nodes from the front while they go entirely; then, unless
/// `approx`, entries of the next node are marked deleted. `limit` (0: none) caps the
/// entries removed, node by node. Returns the entries removed.
pub fn trim(a: &mut Arena, m: &mut Meta, how: Trim, approx: bool, limit: u64) -> u64 {
    let mut deleted = 0u64;
    while m.nodes > 0 {
        if let Trim::MaxLen(max) = how {
            if m.length <= max {
                break;
            }
        }
        let (master, node, view) = view_of(a, m, 0);
        let entries = view.count as u64;
        if limit > 0 && deleted + entries > limit {
            break;
        }
        let remove = match how {
            Trim::MaxLen(max) => m.length - entries >= max,
            Trim::MinId(min) => view.entries.last().is_some_and(|e| e.id < min),
        };
        if remove {
            remove_node(a, m, 0);
            m.length -= entries;
            deleted += entries;
            continue;
        }
        if approx {
            break;
        }
        let mut v = node_lp(a, node).to_vec();
        let mut from_node = 0u64;
        for e in &view.entries {
            let stop = match how {
                Trim::MaxLen(max) => m.length <= max,
                Trim::MinId(min) => e.id >= min,
            };
            if stop {
                break;
            }
            if !e.deleted() {
                // Same size: the later offsets stay valid.
                replace_int(&mut v, e.flags_off, e.flags | FLAG_DELETED);
                from_node += 1;
                m.length -= 1;
            }
        }
        deleted += from_node;
        bump_counters(&mut v, -(from_node as i64), from_node as i64);
        let r = store_node(a, node, &v);
        if r != node {
            set_slot(a, m, 0, master, r);
        }
        break;
    }
    if m.length == 0 {
        m.first_id = Id::MIN;
    } else if deleted > 0 {
        m.first_id = edge_id(a, m, true, true);
    }
    deleted
}

/// Frees every node and the index.
pub fn free_all(a: &mut Arena, v: &[u8]) {
    let mut m = Meta::read(v);
    while m.nodes > 0 {
        remove_node(a, &mut m, 0);
    }
    super::stream_groups::free_all(a, m.groups);
}

/// Frees up to `budget` nodes of a graveyard copy `payload` (updated in place). Returns
/// (blocks freed, done).
pub fn free_some(a: &mut Arena, payload: &mut [u8], budget: usize) -> (u64, bool) {
    let mut m = Meta::read(payload);
    let mut n = 0u64;
    while m.nodes > 0 && (n as usize) < budget.max(1) {
        remove_node(a, &mut m, 0);
        n += 1;
    }
    if m.nodes == 0 && (n as usize) < budget.max(1) {
        let left = budget.max(1) - n as usize;
        let (k, _) = super::stream_groups::free_some(a, &mut m.groups, left);
        n += k;
    }
    let enc = m.encode();
    let k = payload.len().min(24);
    payload[..k].copy_from_slice(&enc[..k]);
    (n, m.nodes == 0 && m.groups == NULL)
}

/// Out-of-line blocks (for the lazy-free decision): nodes, and the groups' blocks.
pub fn block_count(a: &Arena, v: &[u8]) -> u64 {
    let m = Meta::read(v);
    m.nodes as u64 + super::stream_groups::block_count(a, m.groups)
}

/// Bytes of the index and the nodes (MEMORY USAGE).
pub fn bytes(a: &Arena, v: &[u8]) -> u64 {
    let m = Meta::read(v);
    let groups = super::stream_groups::bytes(a, m.groups);
    if m.nodes == 0 {
        return groups;
    }
    let mut sum = groups + crate::arena::size_class(m.cap as usize * SLOT_BYTES).1 as u64;
    for i in 0..m.nodes {
        let (_, node) = node_at(a, &m, i);
        sum += crate::arena::size_class(NODE_HDR + node_cap(a, node)).1 as u64;
    }
    sum
}

/// Deep copy (COPY): new nodes and index, the same metadata.
pub fn clone(a: &mut Arena, v: &[u8]) -> Vec<u8> {
    let src = Meta::read(v);
    let mut m = src;
    m.index = NULL;
    m.start = 0;
    m.nodes = 0;
    m.cap = 0;
    for i in 0..src.nodes {
        let (master, node) = node_at(a, &src, i);
        let bytes = node_lp(a, node).to_vec();
        let r = new_node(a, &bytes);
        push_slot(a, &mut m, master, r);
    }
    m.groups = super::stream_groups::clone(a, src.groups);
    m.encode().to_vec()
}

/// A stream decoded from RDB, as the keyspace will hold it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Loaded {
    /// (master ID, node listpack), ascending, each checked by [`parse_node`].
    pub nodes: Vec<(Id, Vec<u8>)>,
    pub length: u64,
    pub last_id: Id,
    pub first_id: Id,
    pub max_deleted_id: Id,
    pub entries_added: u64,
    /// Consumer groups, names distinct (each checked by `LoadedGroup::check`).
    pub groups: Vec<super::stream_groups::LoadedGroup>,
}

impl Loaded {
    /// Checks what the keyspace relies on: masters ascending and each node's entries
    /// before the next master, live entries summing to the length, the last ID at least
    /// every entry's.
    pub fn consistent(&self) -> bool {
        let mut live = 0u64;
        let mut prev_last: Option<Id> = None;
        for (master, l) in &self.nodes {
            let Some(view) = parse_node(l, *master) else {
                return false;
            };
            if prev_last.is_some_and(|p| p >= *master) {
                return false;
            }
            prev_last = view.entries.last().map(|e| e.id);
            live += view.count as u64;
        }
        let mut names = std::collections::HashSet::new();
        live == self.length
            && prev_last.is_none_or(|p| p <= self.last_id)
            && self
                .groups
                .iter()
                .all(|g| names.insert(g.name.clone()) && g.check())
    }

    /// The metadata as a stored stream would have it (no nodes).
    pub fn meta(&self) -> Meta {
        Meta {
            length: self.length,
            last_id: self.last_id,
            first_id: self.first_id,
            max_deleted_id: self.max_deleted_id,
            entries_added: self.entries_added,
            ..Meta::default()
        }
    }

    /// Stores the nodes in the arena; returns the value bytes.
    pub fn store(&self, a: &mut Arena) -> [u8; HEADER_BYTES] {
        let mut m = Meta {
            length: self.length,
            last_id: self.last_id,
            first_id: self.first_id,
            max_deleted_id: self.max_deleted_id,
            entries_added: self.entries_added,
            ..Meta::default()
        };
        for (master, l) in &self.nodes {
            let r = new_node(a, l);
            push_slot(a, &mut m, *master, r);
        }
        for g in &self.groups {
            g.store(a, &mut m.groups);
        }
        m.encode()
    }

    /// Arena bytes the stream will take (nodes, slots, header).
    pub fn arena_bytes(&self) -> u64 {
        self.nodes
            .iter()
            .map(|(_, l)| (l.len() + NODE_HDR + SLOT_BYTES * 2 + 8) as u64)
            .sum::<u64>()
            + self.groups.iter().map(|g| g.arena_bytes()).sum::<u64>()
            + HEADER_BYTES as u64
    }
}

/// Creates (or replaces) key `key` with a loaded stream (RESTORE, RDB load).
pub fn create_from(
    ks: &mut crate::keyspace::Keyspace,
    db: usize,
    key: &[u8],
    s: &Loaded,
    ttl: crate::keyspace::Ttl,
) -> Ref {
    let v = s.store(&mut ks.arena);
    ks.set_value(db, key, crate::keyspace::Kind::Stream, ENC_STREAM, &v, ttl)
}

/// The nodes of a stored stream, for the RDB writer: (master ID, listpack).
pub fn nodes<'a>(a: &'a Arena, v: &[u8]) -> Vec<(Id, &'a [u8])> {
    let m = Meta::read(v);
    (0..m.nodes)
        .map(|i| {
            let (id, node) = node_at(a, &m, i);
            (id, node_lp(a, node))
        })
        .collect()
}

/// Checks a stream value of an image (its inline bytes `v` at arena offset `at`; `live`
/// false for a graveyard copy, which keeps only the first 24 bytes' meaning) and claims
/// its index and nodes.
pub fn validate(
    a: &Arena,
    claims: &mut Claims,
    v: &[u8],
    live: bool,
    at: u64,
) -> Result<(), Corrupt> {
    if (live && !is_stream(v)) || v.len() < 24 || v[0] != TAG {
        return Err(Corrupt::new("stream header", at));
    }
    let m = Meta::read(v);
    super::stream_groups::validate(a, claims, m.groups, live)?;
    if m.nodes == 0 {
        if m.index != NULL || (live && m.length != 0) {
            return Err(Corrupt::new("empty stream with an index", at));
        }
        return Ok(());
    }
    if m.start as u64 + m.nodes as u64 > m.cap as u64 || m.cap > (u32::MAX / 32) {
        return Err(Corrupt::new("stream index bounds", at));
    }
    claims.claim(m.index, m.cap as u64 * SLOT_BYTES as u64, "stream index")?;
    let mut live_count = 0u64;
    let mut prev_last: Option<Id> = None;
    for i in 0..m.nodes {
        let (master, node) = node_at(a, &m, i);
        claims.peek(node, NODE_HDR as u64, "stream node")?;
        let cap = node_cap(a, node);
        claims.claim(node, (NODE_HDR + cap) as u64, "stream node")?;
        let l = a.bytes(node, NODE_HDR, cap);
        if cap < lp::HEADER + 1 || lp::total(l) > cap {
            return Err(Corrupt::at("stream node listpack size", node));
        }
        let l = &l[..lp::total(l)];
        if !lp::validate(l, false) {
            return Err(Corrupt::at("stream node listpack", node));
        }
        let Some(view) = parse_node(l, master) else {
            return Err(Corrupt::at("stream node entries", node));
        };
        if prev_last.is_some_and(|p| p >= master) {
            return Err(Corrupt::at("stream nodes out of order", node));
        }
        prev_last = view.entries.last().map(|e| e.id);
        live_count += view.count as u64;
    }
    if live && (live_count != m.length || prev_last.is_some_and(|p| p > m.last_id)) {
        return Err(Corrupt::new("stream length or last ID", at));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arena() -> Arena {
        Arena::new(64 << 20, [1, 2]).unwrap()
    }

    fn add(a: &mut Arena, m: &mut Meta, ms: u64, pairs: &[&[u8]], limits: Limits) {
        let id = Id::new(ms, 0);
        append(a, m, id, pairs, limits);
    }

    #[test]
    fn id_text_is_ms_dash_seq_at_every_width() {
        let mut buf = [0u8; ID_TEXT_MAX];
        for id in [Id::new(0, 0), Id::new(1732000000000, 7), Id::MAX] {
            assert_eq!(
                id.text(&mut buf),
                format!("{}-{}", id.ms, id.seq).as_bytes()
            );
        }
    }

    /// Appends go into the tail node in place. The node's count crosses listpack integer
    /// widths (127 → 128, 4095 → 4096) and entries alternate between the master fields and
    /// others, so both entry forms and a count that grows its encoding are written; the node
    /// must stay a valid listpack and give back every entry.
    #[test]
    fn in_place_appends_keep_the_node_valid_across_count_widths() {
        let mut a = arena();
        let mut m = Meta::default();
        let limits = Limits {
            max_bytes: 1 << 20,
            max_entries: 5000,
        };
        let mut want = Vec::new();
        for i in 1..=4200u64 {
            let v = format!("v{i}");
            let pairs: Vec<&[u8]> = if i % 3 == 0 {
                vec![b"other", v.as_bytes(), b"g", b"x"]
            } else {
                vec![b"f", v.as_bytes()]
            };
            append(&mut a, &mut m, Id::new(i, i % 5), &pairs, limits);
            want.push((i, pairs.iter().map(|p| p.to_vec()).collect::<Vec<_>>()));
        }
        assert_eq!((m.nodes, m.length), (1, 4200));
        let (_, node) = node_at(&a, &m, 0);
        let l = node_lp(&a, node);
        assert!(lp::validate(l, false));
        assert_eq!(int_of(lp::get(l, lp::first(l).unwrap())), Some(4200));
        let mut got = Vec::new();
        range(&a, &m, Id::MIN, Id::MAX, false, |id, pairs| {
            let flat: Vec<Vec<u8>> = pairs.into_iter().flat_map(|(f, v)| [f, v]).collect();
            got.push((id, flat));
            true
        });
        assert_eq!(got.len(), want.len());
        for ((id, flat), (i, pairs)) in got.iter().zip(&want) {
            assert_eq!(*id, Id::new(*i, i % 5));
            assert_eq!(flat, pairs);
        }
    }

    #[test]
    fn nodes_split_at_max_entries_and_max_bytes() {
        let mut a = arena();
        let mut m = Meta::default();
        let by_entries = Limits {
            max_bytes: 4096,
            max_entries: 3,
        };
        for ms in 1..=7 {
            add(&mut a, &mut m, ms, &[b"f", b"v"], by_entries);
        }
        assert_eq!((m.nodes, m.length), (3, 7));
        let masters: Vec<u64> = (0..m.nodes).map(|i| node_at(&a, &m, i).0.ms).collect();
        assert_eq!(masters, [1, 4, 7]);
        // Bytes: a node takes entries while its listpack plus the new fields stays under
        // the limit.
        let mut m2 = Meta::default();
        let by_bytes = Limits {
            max_bytes: 64,
            max_entries: 0,
        };
        let big = [b'x'; 20];
        for ms in 1..=6 {
            add(&mut a, &mut m2, ms, &[b"f", &big], by_bytes);
        }
        for i in 0..m2.nodes {
            let (_, node) = node_at(&a, &m2, i);
            let l = node_lp(&a, node);
            let view = parse_node(l, node_at(&a, &m2, i).0).unwrap();
            // Only a node's last entry may have taken it past the limit.
            assert!(
                view.count == 1 || l.len() < 64 + 40,
                "node {i}: {}",
                l.len()
            );
        }
        assert!(m2.nodes >= 3);
        let mut seen = vec![];
        range(&a, &m2, Id::MIN, Id::MAX, false, |id, p| {
            assert_eq!(p, vec![(b"f".to_vec(), big.to_vec())]);
            seen.push(id.ms);
            true
        });
        assert_eq!(seen, [1, 2, 3, 4, 5, 6]);
    }

    #[test]
    fn image_validation_refuses_damaged_nodes_and_index() {
        let mut a = arena();
        let mut m = Meta::default();
        let l = Limits {
            max_bytes: 4096,
            max_entries: 2,
        };
        for ms in 1..=5 {
            add(&mut a, &mut m, ms, &[b"f", b"v"], l);
        }
        let v = m.encode();
        assert!(validate(&a, &mut Claims::new(&a), &v, true, 0).is_ok());
        // A wrong length, a node whose entry flags are out of range, nodes out of order.
        let mut wrong = m;
        wrong.length = 4;
        assert!(validate(&a, &mut Claims::new(&a), &wrong.encode(), true, 0).is_err());
        let (_, node) = node_at(&a, &m, 1);
        let view = parse_node(node_lp(&a, node), node_at(&a, &m, 1).0).unwrap();
        let flags_at = NODE_HDR + view.entries[0].flags_off;
        a.bytes_mut(node, flags_at, 1)[0] = 9;
        assert!(validate(&a, &mut Claims::new(&a), &v, true, 0).is_err());
        a.bytes_mut(node, flags_at, 1)[0] = FLAG_SAMEFIELDS as u8;
        assert!(validate(&a, &mut Claims::new(&a), &v, true, 0).is_ok());
        let (id0, n0) = node_at(&a, &m, 0);
        let (id1, n1) = node_at(&a, &m, 1);
        set_slot(&mut a, &m, 0, id1, n1);
        set_slot(&mut a, &m, 1, id0, n0);
        assert!(validate(&a, &mut Claims::new(&a), &v, true, 0).is_err());
    }

    #[test]
    fn samefields_delete_trim_and_reverse() {
        let mut a = arena();
        let mut m = Meta::default();
        let l = Limits {
            max_bytes: 4096,
            max_entries: 100,
        };
        add(&mut a, &mut m, 1, &[b"a", b"1", b"b", b"2"], l);
        add(&mut a, &mut m, 2, &[b"a", b"3", b"b", b"4"], l);
        add(&mut a, &mut m, 3, &[b"c", b"5"], l);
        let (master, node) = node_at(&a, &m, 0);
        let view = parse_node(node_lp(&a, node), master).unwrap();
        let flags: Vec<i64> = view.entries.iter().map(|e| e.flags).collect();
        assert_eq!(flags, [FLAG_SAMEFIELDS, FLAG_SAMEFIELDS, 0]);
        assert!(delete(&mut a, &mut m, Id::new(2, 0)));
        assert!(!delete(&mut a, &mut m, Id::new(2, 0)));
        let mut rev = vec![];
        range(&a, &m, Id::MIN, Id::MAX, true, |id, _| {
            rev.push(id.ms);
            true
        });
        assert_eq!(rev, [3, 1]);
        assert_eq!(trim(&mut a, &mut m, Trim::MaxLen(1), false, 0), 1);
        assert_eq!((m.length, m.first_id), (1, Id::new(3, 0)));
        assert_eq!(edge_id(&a, &m, true, false), Id::new(1, 0));
        assert!(delete(&mut a, &mut m, Id::new(3, 0)));
        assert_eq!(m.nodes, 0);
        free_all(&mut a, &m.encode());
    }

    /// A node's count stays right across the appends that change its encoding's size
    /// (127 → 128 takes a 13-bit int) and those that overwrite it in place.
    #[test]
    fn node_count_survives_encoding_growth() {
        let mut a = arena();
        let mut m = Meta::default();
        let l = Limits {
            max_bytes: 1 << 20,
            max_entries: 1000,
        };
        for ms in 1..=300 {
            add(&mut a, &mut m, ms, &[b"f", b"v"], l);
        }
        assert_eq!(m.nodes, 1);
        let (master, node) = node_at(&a, &m, 0);
        let view = parse_node(node_lp(&a, node), master).expect("a well-formed node");
        assert_eq!((view.count, view.entries.len()), (300, 300));
        free_all(&mut a, &m.encode());
    }

    /// Every node but the tail gives back the room it grew into once full, and the
    /// entries read back the same across the moved nodes.
    #[test]
    fn full_nodes_keep_no_more_room_than_their_listpack() {
        let mut a = arena();
        let mut m = Meta::default();
        let l = Limits {
            max_bytes: 4096,
            max_entries: 100,
        };
        for ms in 1..=1000u64 {
            let v = format!("value-{:012}", ms * 7919);
            add(&mut a, &mut m, ms, &[b"f", v.as_bytes()], l);
        }
        assert_eq!(m.nodes, 10);
        for i in 0..m.nodes - 1 {
            let (_, node) = node_at(&a, &m, i);
            let slack = node_cap(&a, node) - node_lp(&a, node).len();
            assert!(
                slack < SEAL_MIN_SLACK_BYTES,
                "node {i} keeps {slack} spare bytes"
            );
        }
        let mut seen = 0u64;
        range(&a, &m, Id::MIN, Id::MAX, false, |id, e| {
            seen += 1;
            let want = format!("value-{:012}", id.ms * 7919);
            assert_eq!(id.ms, seen);
            assert_eq!(e, vec![(b"f".to_vec(), want.into_bytes())]);
            true
        });
        assert_eq!(seen, 1000);
        free_all(&mut a, &m.encode());
    }

    /// The unchecked walk that forward reads use sees what the checked parse sees, and
    /// stops where its visitor says.
    #[test]
    fn walk_node_matches_parse_node() {
        let mut a = arena();
        let mut m = Meta::default();
        let l = Limits {
            max_bytes: 4096,
            max_entries: 100,
        };
        add(&mut a, &mut m, 1, &[b"a", b"1", b"b", b"2"], l);
        add(&mut a, &mut m, 2, &[b"a", b"3", b"b", b"4"], l);
        add(&mut a, &mut m, 3, &[b"c", b"5"], l);
        add(&mut a, &mut m, 4, &[b"a", b"6", b"b", b"7"], l);
        add(&mut a, &mut m, 5, &[b"x", b"8", b"y", b"9", b"z", b"10"], l);
        assert!(delete(&mut a, &mut m, Id::new(2, 0)));
        let (master, node) = node_at(&a, &m, 0);
        let lp = node_lp(&a, node);
        let view = parse_node(lp, master).unwrap();
        let mut walked = vec![];
        assert!(walk_node(lp, master, |v, e| {
            walked.push((e.id, e.flags, e.body_off, entry_pairs(lp, v, e)));
            true
        }));
        let parsed: Vec<_> = view
            .entries
            .iter()
            .map(|e| (e.id, e.flags, e.body_off, entry_pairs(lp, &view, e)))
            .collect();
        assert_eq!(walked, parsed);
        assert_eq!(walked.len(), 5);
        let mut seen = 0;
        assert!(!walk_node(lp, master, |_, _| {
            seen += 1;
            seen < 2
        }));
        assert_eq!(seen, 2);
        let mut forward = vec![];
        range(&a, &m, Id::new(2, 0), Id::new(4, 0), false, |id, _| {
            forward.push(id.ms);
            true
        });
        assert_eq!(forward, [3, 4]);
        let mut backward = vec![];
        assert!(walk_node_rev(lp, master, |id, flags| {
            backward.push((id, flags));
            true
        }));
        let mut expected: Vec<_> = parsed.iter().map(|w| (w.0, w.1)).collect();
        expected.reverse();
        assert_eq!(backward, expected);
        assert_eq!(last_valid_id(&a, &m), Id::new(5, 0));
        assert!(delete(&mut a, &mut m, Id::new(5, 0)));
        assert!(delete(&mut a, &mut m, Id::new(4, 0)));
        assert_eq!(last_valid_id(&a, &m), Id::new(3, 0));
        assert_eq!(edge_id(&a, &m, false, false), Id::new(5, 0));
        free_all(&mut a, &m.encode());
    }
}
