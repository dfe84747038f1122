//! The keyspace: `databases` logical databases, each a [`DictHeader`] of entries plus a
//! chunked index of the keys that carry a TTL, all inside the arena.
//!
//! Entry layout (one arena block per key; see ARCHITECTURE.md):
//!
//! | offset            | size | field                                          |
//! |-------------------|------|------------------------------------------------|
//! | 0                 | 4    | next entry in the bucket chain (Ref)           |
//! | 4                 | 4    | key length                                     |
//! | 8                 | 4    | value length in bytes                          |
//! | 12                | 4    | LRU clock (24 bits) or LFU (16-bit time, 8-bit counter) |
//! | 16                | 1    | value kind                                     |
//! | 17                | 1    | encoding                                       |
//! | 18                | 1    | flags (bit 0: has expire, bit 1: value out of line) |
//! | 19                | 1    | reserved                                       |
//! | 20                | 4    | index in the db's volatile-key vector          |
//! | 24                | klen | key bytes                                      |
//! | 24+klen           | vlen | value bytes                                    |
//! | 24+klen+vlen      | 8    | expire time, ms since epoch (only with flag)   |

//! A string of [`BIG_VALUE_BYTES`] or more is stored out of line (flag bit 1): the entry's
//! value field is then 4 bytes, the [`Ref`] of its own arena block (see
//! [`Keyspace::pin_value`]), so a pending reply can keep sending it after the key is
//! overwritten or deleted.

pub mod blocks;
pub mod events;
pub mod evict;
pub mod expire;
pub mod tiered;
pub mod tracking;
pub mod validate;
pub mod watch;

use crate::arena::chunked::ChunkedVecHeader;
use crate::arena::dict::DictHeader;
use crate::arena::{Arena, Pod, Ref, NULL};
use crate::util::Rng;
use blocks::drop_block;

pub const ENTRY_HEADER_BYTES: usize = 24;
const OFF_VAL_LEN: usize = 8;
const OFF_LRU: usize = 12;
const OFF_KIND: usize = 16;
const OFF_ENC: usize = 17;
const OFF_FLAGS: usize = 18;
const OFF_VIDX: usize = 20;
const FLAG_EXPIRE: u8 = 1;
const FLAG_BIG: u8 = 2;

/// Strings this long or longer live in their own arena block (so replies can reference
/// them instead of copying). `min-string-size-avoid-copy-reply` values below this act as
/// this value.
pub const BIG_VALUE_BYTES: usize = 4096;
/// Header of an out-of-line value block: length (u32), orphan flag (u32), and the
/// prev/next links (Ref) of the orphan list (blocks the keyspace dropped while a reply
/// still referenced them).
const BIG_HDR: usize = 16;
/// Slot 3 is the collections' value graveyard (`collections::ROOT_VALUE_GRAVEYARD`).
const ROOT_ORPHANS: usize = 4;

/// Arena root slots used by the keyspace.
const ROOT_DBS: usize = 0;
const ROOT_NUM_DBS: usize = 1;
const ROOT_GRAVEYARD: usize = 2;
/// Arena root slot of the value graveyard (detached big values, freed in slices); the
/// collections own what is in it, the keyspace only asks whether it is empty.
pub const ROOT_VALUE_GRAVEYARD: usize = 3;

/// `ValueOps::validate`: (arena, claims, kind, value bytes, the value's arena offset).
pub type ValidateValueFn = fn(
    &Arena,
    &mut crate::arena::validate::Claims,
    Kind,
    &[u8],
    u64,
) -> Result<(), crate::arena::validate::Corrupt>;
/// `ValueOps::validate_graveyard`.
pub type ValidateGraveyardFn =
    fn(&Arena, &mut crate::arena::validate::Claims) -> Result<(), crate::arena::validate::Corrupt>;

/// [`ValueOps::lazyfree_step`].
pub type LazyfreeStepFn = fn(&mut Arena, usize, &mut Vec<tiered::ColdStub>) -> (u64, u64, bool);
/// [`ValueOps::cold_parts`].
pub type ColdPartsFn = fn(&Arena, Kind, &[u8]) -> Vec<(Ref, tiered::ColdStub)>;
/// [`ValueOps::warm_part`].
pub type WarmPartFn = fn(&mut Arena, Kind, &mut [u8], Ref, &[u8]) -> Result<Ref, String>;

/// What the keyspace needs from the value encodings built on top of it (`collections`):
/// freeing, copying and checking what a value owns outside its entry. The keyspace sits
/// below the collections, so they hand it these functions when it is made
/// (`collections::VALUE_OPS`, through `collections::new_keyspace` / `keyspace_from_arena`).
pub struct ValueOps {
    /// Frees what a value owns outside its entry; true when it went to the value graveyard.
    /// Record places in the tier file the value owned (cold list nodes) go to the vector.
    pub release: fn(&mut Arena, Kind, &[u8], &mut Vec<tiered::ColdStub>) -> bool,
    /// A deep copy: the value bytes of an independent copy (COPY).
    pub clone: fn(&mut Arena, Kind, &[u8]) -> Vec<u8>,
    /// Frees up to a budget of graveyard blocks: (blocks freed, values finished, more left).
    /// Record places in the tier file they owned (cold list nodes) go to the vector.
    pub lazyfree_step: LazyfreeStepFn,
    /// Checks a stored value's structures at load, claiming their blocks.
    pub validate: ValidateValueFn,
    /// Checks the value graveyard at load, claiming its blocks.
    pub validate_graveyard: ValidateGraveyardFn,
    /// Whether bytes read back from the tier file are a well-formed single-block value
    /// of the kind (a checksum does not say the collection code may trust them).
    pub single_block_is_valid: fn(Kind, &[u8]) -> bool,
    /// Cold parts of a value: parts of a multi-block value whose bytes are only in the
    /// tier file (quicklist nodes), counted from its header.
    pub cold_part_count: fn(Kind, &[u8]) -> u32,
    /// Its cold parts and their records' places.
    pub cold_parts: ColdPartsFn,
    /// Brings a cold part back with its bytes read from the tier file (checked as a
    /// single-block value's), updating the value's header (the slice); the new part.
    pub warm_part: WarmPartFn,
    /// Makes a part cold (its bytes written at the stub's place), updating the header;
    /// None: this part may not be cold.
    pub cool_part: fn(&mut Arena, Kind, &mut [u8], Ref, tiered::ColdStub) -> Option<Ref>,
}

/// The type of the value an entry holds (Redis's `TYPE` names).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    String = 0,
    List = 1,
    Set = 2,
    ZSet = 3,
    Hash = 4,
    Stream = 5,
}

impl Kind {
    /// The kind a stored kind byte names, or None for a byte the server never writes
    /// (image validation refuses such an entry before anything reads it).
    pub fn decode(v: u8) -> Option<Kind> {
        match v {
            0 => Some(Kind::String),
            1 => Some(Kind::List),
            2 => Some(Kind::Set),
            3 => Some(Kind::ZSet),
            4 => Some(Kind::Hash),
            5 => Some(Kind::Stream),
            _ => None,
        }
    }
    /// The kind of an entry in the keyspace. Every entry's byte is one the executor
    /// wrote or one `validate::validate_image` accepted, so it always decodes; the
    /// fallback (a string, whose reads stay inside the entry) is never taken.
    fn of_stored(v: u8) -> Kind {
        Kind::decode(v).unwrap_or(Kind::String)
    }
    pub fn type_name(self) -> &'static str {
        match self {
            Kind::String => "string",
            Kind::List => "list",
            Kind::Set => "set",
            Kind::ZSet => "zset",
            Kind::Hash => "hash",
            Kind::Stream => "stream",
        }
    }
}

/// String encodings, reported by OBJECT ENCODING with Redis's names and chosen by Redis's
/// rules (the bytes are stored the same way whatever the encoding).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum StrEnc {
    Raw = 0,
    Embstr = 1,
    Int = 2,
}

/// Redis stores a string as `embstr` up to 44 bytes.
pub const EMBSTR_MAX_BYTES: usize = 44;

impl StrEnc {
    /// The encoding Redis gives a value set by SET (tryObjectEncoding).
    pub fn for_value(v: &[u8]) -> StrEnc {
        if v.len() <= 20 && crate::util::parse_i64(v).is_some() {
            StrEnc::Int
        } else if v.len() <= EMBSTR_MAX_BYTES {
            StrEnc::Embstr
        } else {
            StrEnc::Raw
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            StrEnc::Raw => "raw",
            StrEnc::Embstr => "embstr",
            StrEnc::Int => "int",
        }
    }
    fn from_u8(v: u8) -> StrEnc {
        match v {
            1 => StrEnc::Embstr,
            2 => StrEnc::Int,
            _ => StrEnc::Raw,
        }
    }
}

/// What a write does to the key's TTL.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ttl {
    /// Remove any TTL (plain SET).
    Clear,
    /// Keep the existing TTL (SET KEEPTTL, APPEND, INCR...).
    Keep,
    /// Set this absolute expire time in ms.
    At(i64),
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct DbHeader {
    dict: DictHeader,
    /// Entry refs of keys with a TTL (for sampling by active expiry and volatile eviction).
    volatile: ChunkedVecHeader,
}
unsafe impl Pod for DbHeader {}

/// Size of one database header in the arena (part of a snapshot image's layout fingerprint).
pub const DB_HEADER_BYTES: usize = std::mem::size_of::<DbHeader>();

/// A detached database waiting to be freed in slices (FLUSHALL ASYNC, FLUSHDB).
#[repr(C)]
#[derive(Clone, Copy)]
struct GraveNode {
    next: Ref,
    _pad: u32,
    db: DbHeader,
}
unsafe impl Pod for GraveNode {}

/// Counters the keyspace keeps for INFO stats.
#[derive(Default, Debug, Clone)]
pub struct KeyspaceStats {
    pub hits: u64,
    pub misses: u64,
    pub expired_keys: u64,
    pub evicted_keys: u64,
    pub lazyfreed_objects: u64,
    pub expired_stale_perc: f64,
    pub expired_time_cap_reached_count: u64,
    /// Big request arguments read into arena blocks, and how many of those a stored value
    /// took over without a copy (INFO stats `request_args_in_place` / `_adopted`).
    pub request_args_in_place: u64,
    pub request_args_adopted: u64,
    /// Big request arguments read into the query buffer instead, because their declared
    /// length did not fit the in-place budget (INFO stats `request_args_over_budget`).
    pub request_args_over_budget: u64,
}

pub struct Keyspace {
    pub arena: Arena,
    /// A key's hash computed ahead (the server's pipelined prefetch): `(address, length,
    /// hash)` of the key bytes, which stay unchanged while the hint is set; see
    /// [`Keyspace::set_key_hash_hint`].
    key_hash_hint: Option<(usize, usize, u64)>,
    /// The collections' value functions (see [`ValueOps`]).
    values: &'static ValueOps,
    dbs: Ref,
    num_dbs: usize,
    pub stats: KeyspaceStats,
    pub rng: Rng,
    /// Track LFU counters instead of LRU clocks (an LFU maxmemory policy is active).
    pub lfu: bool,
    pub lfu_log_factor: u32,
    pub lfu_decay_time_min: u32,
    /// The clock key accesses are stamped with (ms), set by the executor before each
    /// command and by its cron (Redis caches its LRU clock the same way): one clock read
    /// per command instead of one per key touched. 0: not set yet, read the clock.
    pub access_clock_ms: i64,
    /// Entries waiting in the graveyard (for INFO lazyfree_pending_objects).
    pub lazyfree_pending: u64,
    /// Loading the AOF: no key counts as expired (replay must reach the state the log
    /// recorded, as Redis's keyIsExpired during loading).
    pub loading: bool,
    /// Clients are paused (CLIENT PAUSE): an expired key reads as missing but stays, so
    /// the dataset does not change until the pause ends (Redis's expireIfNeeded).
    pub expiry_held: bool,
    /// When Some (the AOF is on), keys deleted by expiry or eviction are queued here so
    /// the propagation hook logs a DEL for each (Redis's propagateDeletion).
    pub deletions: Option<Vec<(usize, Vec<u8>)>>,
    /// Expiry, eviction, misses and new keys for keyspace notifications (`events.rs`).
    pub events: events::KeyEvents,
    /// Out-of-line value blocks referenced by pending replies: block -> reference count.
    /// Kept off the arena on purpose: a snapshot image never records a client's reference
    /// (see ARCHITECTURE.md, "Large values").
    pins: std::collections::HashMap<Ref, u32>,
    /// Blocks holding big request arguments, by the address of their bytes (see
    /// [`Keyspace::alloc_arg_block`]).
    arg_blocks: std::collections::HashMap<usize, Ref>,
    /// Declared bytes of the blocks in `arg_blocks`: what clients have claimed and not yet
    /// finished with, held under [`Keyspace::try_alloc_arg_block`]'s budget.
    pub arg_block_bytes: u64,
    /// WATCHed keys (off the arena: client state, not data). Expiry, eviction, FLUSHDB,
    /// FLUSHALL and SWAPDB touch them here; commands touch the keys they write in the
    /// pipeline (`Server::signal_written`).
    pub watch: watch::Watches,
    /// Client-side caching: who may cache which key (CLIENT TRACKING).
    pub tracking: tracking::Tracking,
    /// SSD tiering: cold entries' accounting and freed locations (`tiered.rs`).
    pub tier: tiered::TierMeta,
}

#[inline]
pub fn entry_key_len(a: &Arena, e: Ref) -> usize {
    a.read_u32(e, 4) as usize
}
#[inline]
fn entry_val_len(a: &Arena, e: Ref) -> usize {
    a.read_u32(e, OFF_VAL_LEN) as usize
}
#[inline]
fn entry_flags(a: &Arena, e: Ref) -> u8 {
    a.bytes(e, OFF_FLAGS, 1)[0]
}
#[inline]
fn entry_bytes(key_len: usize, val_len: usize, has_expire: bool) -> usize {
    ENTRY_HEADER_BYTES + key_len + val_len + if has_expire { 8 } else { 0 }
}
/// The size an entry was allocated with.
pub fn entry_size(a: &Arena, e: Ref) -> usize {
    entry_bytes(
        entry_key_len(a, e),
        entry_val_len(a, e),
        entry_flags(a, e) & FLAG_EXPIRE != 0,
    )
}

/// Releases what an entry's value owns outside the entry block (collections' out-of-line
/// structures; big ones go to the value graveyard). Called by every path that frees an
/// entry. Returns true if the value went to the graveyard.
fn release_entry_value(
    a: &mut Arena,
    values: &ValueOps,
    e: Ref,
    freed: &mut Vec<tiered::ColdStub>,
) -> bool {
    let kind = a.bytes(e, OFF_KIND, 1)[0];
    // A cold collection's value field is a stub: only single-block (inline) encodings
    // are tiered, and they own nothing outside the entry.
    if kind == Kind::String as u8 || entry_flags(a, e) & tiered::FLAG_COLD != 0 {
        return false;
    }
    let (kl, vl) = (entry_key_len(a, e), entry_val_len(a, e));
    // Only the value's header is needed (inline encodings own nothing outside).
    let mut head = [0u8; 64];
    let n = vl.min(head.len());
    head[..n].copy_from_slice(a.bytes(e, ENTRY_HEADER_BYTES + kl, n));
    (values.release)(a, Kind::of_stored(kind), &head[..n], freed)
}

/// Frees an unlinked entry and what its value owns: its out-of-line string block (freed,
/// or orphaned while a reply references it) and a collection's structures (big ones go to
/// the value graveyard). Called by every path that frees an entry. Returns true if the
/// value went to the graveyard.
fn free_entry(
    a: &mut Arena,
    values: &ValueOps,
    pins: &std::collections::HashMap<Ref, u32>,
    tier: &mut tiered::TierMeta,
    e: Ref,
) -> bool {
    tier.on_free(a, e);
    if entry_flags(a, e) & FLAG_BIG != 0 {
        let b = a.read_u32(e, ENTRY_HEADER_BYTES + entry_key_len(a, e));
        drop_block(a, pins, b);
    }
    let mut nodes = Vec::new();
    let graved = release_entry_value(a, values, e, &mut nodes);
    tier.on_free_nodes(nodes);
    let size = entry_size(a, e);
    a.free(e, size);
    graved
}

/// The LRU clock: seconds, 24 bits, as Redis.
pub const LRU_CLOCK_MAX: u32 = (1 << 24) - 1;
pub fn lru_clock() -> u32 {
    ((crate::util::now_ms() / 1000) as u32) & LRU_CLOCK_MAX
}
/// LFU's initial counter value (Redis's LFU_INIT_VAL).
pub const LFU_INIT_VAL: u32 = 5;
/// LFU's 16-bit clock: minutes, wrapping (Redis's LFUGetTimeInMinutes).
pub fn lfu_minutes() -> u32 {
    ((crate::util::now_ms() / 60_000) as u32) & 0xFFFF
}

impl Keyspace {
    pub fn new(arena: Arena, num_dbs: usize, values: &'static ValueOps) -> Keyspace {
        let mut arena = arena;
        assert!(num_dbs >= 1);
        let dbs = arena.alloc(DB_HEADER_BYTES * num_dbs);
        let mut ks = Keyspace {
            arena,
            key_hash_hint: None,
            values,
            dbs,
            num_dbs,
            stats: KeyspaceStats::default(),
            rng: Rng::from_time(),
            lfu: false,
            lfu_log_factor: 10,
            lfu_decay_time_min: 1,
            access_clock_ms: 0,
            lazyfree_pending: 0,
            loading: false,
            expiry_held: false,
            deletions: None,
            events: Default::default(),
            pins: std::collections::HashMap::new(),
            arg_blocks: std::collections::HashMap::new(),
            arg_block_bytes: 0,
            watch: watch::Watches::default(),
            tracking: tracking::Tracking::default(),
            tier: Default::default(),
        };
        for i in 0..num_dbs {
            ks.write_db(i, &Self::empty_db());
        }
        ks.arena.set_root(ROOT_DBS, dbs as u64);
        ks.arena.set_root(ROOT_NUM_DBS, num_dbs as u64);
        ks.arena.set_root(ROOT_GRAVEYARD, NULL as u64);
        ks.arena.set_root(ROOT_ORPHANS, NULL as u64);
        ks
    }

    /// Rebuilds the Rust-side handles over an arena restored from a snapshot image: the
    /// databases and the graveyard are found through the arena header's roots; nothing is
    /// parsed per key. An image with fewer databases than `num_dbs` gets empty ones added;
    /// one with more is refused (its keys would be unreachable).
    pub fn from_arena(
        arena: Arena,
        num_dbs: usize,
        values: &'static ValueOps,
    ) -> Result<Keyspace, String> {
        assert!(num_dbs >= 1);
        let bump = arena.bump_bytes();
        let dbs = arena.root(ROOT_DBS);
        let image_dbs = arena.root(ROOT_NUM_DBS);
        if image_dbs == 0 || image_dbs > 1 << 20 {
            return Err(format!("the image records {image_dbs} databases"));
        }
        let image_dbs = image_dbs as usize;
        if dbs == 0 || dbs * 8 + (image_dbs * DB_HEADER_BYTES) as u64 > bump {
            return Err("the database table lies outside the arena".into());
        }
        if image_dbs > num_dbs {
            return Err(format!(
                "the image holds {image_dbs} databases but 'databases' is {num_dbs}"
            ));
        }
        let mut ks = Keyspace {
            arena,
            key_hash_hint: None,
            values,
            dbs: dbs as Ref,
            num_dbs: image_dbs,
            stats: KeyspaceStats::default(),
            rng: Rng::from_time(),
            lfu: false,
            lfu_log_factor: 10,
            lfu_decay_time_min: 1,
            access_clock_ms: 0,
            lazyfree_pending: 0,
            loading: false,
            expiry_held: false,
            deletions: None,
            events: Default::default(),
            pins: std::collections::HashMap::new(),
            arg_blocks: std::collections::HashMap::new(),
            arg_block_bytes: 0,
            watch: watch::Watches::default(),
            tracking: tracking::Tracking::default(),
            tier: Default::default(),
        };
        if image_dbs < num_dbs {
            let grown = ks.arena.alloc(DB_HEADER_BYTES * num_dbs);
            ks.arena
                .copy_within(dbs as Ref, 0, grown, 0, DB_HEADER_BYTES * image_dbs);
            ks.arena.free(dbs as Ref, DB_HEADER_BYTES * image_dbs);
            ks.dbs = grown;
            ks.num_dbs = num_dbs;
            for i in image_dbs..num_dbs {
                ks.write_db(i, &Self::empty_db());
            }
            ks.arena.set_root(ROOT_DBS, grown as u64);
            ks.arena.set_root(ROOT_NUM_DBS, num_dbs as u64);
        }
        // Blocks the keyspace had dropped while replies still referenced them: those
        // clients are gone after a restart, so the blocks are freed now.
        let mut orphan = ks.arena.root(ROOT_ORPHANS);
        let mut hops = 0u64;
        while orphan != NULL as u64 {
            if orphan * 8 >= bump || hops > bump {
                return Err("the orphan list leaves the arena".into());
            }
            let b = orphan as Ref;
            orphan = ks.arena.read_u32(b, 12) as u64;
            let len = ks.arena.read_u32(b, 0) as usize;
            ks.arena.free(b, BIG_HDR + len);
            hops += 1;
        }
        ks.arena.set_root(ROOT_ORPHANS, NULL as u64);
        // Entries still waiting in the graveyard (INFO lazyfree_pending_objects).
        let mut node = ks.arena.root(ROOT_GRAVEYARD);
        let mut hops = 0u64;
        while node != NULL as u64 {
            if node * 8 >= bump || hops > bump {
                return Err("the graveyard list leaves the arena".into());
            }
            let g: GraveNode = ks.arena.read(node as Ref);
            ks.lazyfree_pending += g.db.dict.len();
            node = g.next as u64;
            hops += 1;
        }
        // Big values detached by DEL/overwrite and not yet freed.
        let mut node = ks.arena.root(ROOT_VALUE_GRAVEYARD);
        while node != NULL as u64 {
            if node * 8 >= bump || hops > bump {
                return Err("the value graveyard list leaves the arena".into());
            }
            ks.lazyfree_pending += 1;
            node = ks.arena.read_u32(node as Ref, 0) as u64;
            hops += 1;
        }
        Ok(ks)
    }

    /// Keys in all databases (for logs and the image header).
    pub fn total_keys(&self) -> u64 {
        (0..self.num_dbs).map(|db| self.dbsize(db)).sum()
    }

    fn empty_db() -> DbHeader {
        DbHeader {
            dict: DictHeader::new(ENTRY_HEADER_BYTES as u32),
            volatile: ChunkedVecHeader::default(),
        }
    }

    pub fn num_dbs(&self) -> usize {
        self.num_dbs
    }

    #[inline]
    fn db_ref(&self, db: usize) -> Ref {
        assert!(db < self.num_dbs, "db index {db} out of range");
        self.dbs + (db * DB_HEADER_BYTES / 8) as Ref
    }
    #[inline]
    fn read_db(&self, db: usize) -> DbHeader {
        self.arena.read(self.db_ref(db))
    }
    #[inline]
    fn write_db(&mut self, db: usize, h: &DbHeader) {
        let r = self.db_ref(db);
        self.arena.write(r, h);
    }

    pub fn dbsize(&self, db: usize) -> u64 {
        self.read_db(db).dict.len()
    }
    pub fn volatile_count(&self, db: usize) -> u64 {
        self.read_db(db).volatile.len() as u64
    }
    /// Bucket count of db's table(s) (INFO keyspace and DEBUG HTSTATS style figures).
    pub fn buckets(&self, db: usize) -> u64 {
        self.read_db(db).dict.buckets()
    }

    // ---- entry accessors -------------------------------------------------------------

    #[inline]
    pub fn key(&self, e: Ref) -> &[u8] {
        self.arena
            .bytes(e, ENTRY_HEADER_BYTES, entry_key_len(&self.arena, e))
    }
    #[inline]
    pub fn kind(&self, e: Ref) -> Kind {
        Kind::of_stored(self.arena.bytes(e, OFF_KIND, 1)[0])
    }
    #[inline]
    pub fn str_enc(&self, e: Ref) -> StrEnc {
        StrEnc::from_u8(self.arena.bytes(e, OFF_ENC, 1)[0])
    }
    /// The raw encoding byte (a [`StrEnc`] for strings; the kind's own code otherwise).
    #[inline]
    pub fn enc(&self, e: Ref) -> u8 {
        self.arena.bytes(e, OFF_ENC, 1)[0]
    }
    /// Sets the raw encoding byte (collections changing encoding, e.g. listpack → hashtable).
    pub fn set_enc_byte(&mut self, e: Ref, enc: u8) {
        self.arena.bytes_mut(e, OFF_ENC, 1)[0] = enc;
    }
    pub fn set_str_enc(&mut self, e: Ref, enc: StrEnc) {
        self.arena.bytes_mut(e, OFF_ENC, 1)[0] = enc as u8;
    }
    /// The raw value bytes (the string itself for strings; out-of-line values are read
    /// from their block).
    #[inline]
    pub fn value(&self, e: Ref) -> &[u8] {
        let kl = entry_key_len(&self.arena, e);
        if let Some(b) = self.big_block(e) {
            let len = self.arena.read_u32(b, 0) as usize;
            return self.arena.bytes(b, BIG_HDR, len);
        }
        let vl = entry_val_len(&self.arena, e);
        self.arena.bytes(e, ENTRY_HEADER_BYTES + kl, vl)
    }
    /// The value bytes for writing in place. An out-of-line value that a pending reply
    /// references is copied first (copy-on-write): the reply keeps the old bytes.
    pub fn value_mut(&mut self, e: Ref) -> &mut [u8] {
        self.tier_value_changed(e);
        let kl = entry_key_len(&self.arena, e);
        if let Some(b) = self.big_block(e) {
            let len = self.arena.read_u32(b, 0) as usize;
            let b = if self.pins.contains_key(&b) {
                self.replace_block(e, b, len)
            } else {
                b
            };
            return self.arena.bytes_mut(b, BIG_HDR, len);
        }
        let vl = entry_val_len(&self.arena, e);
        self.arena.bytes_mut(e, ENTRY_HEADER_BYTES + kl, vl)
    }

    #[inline]
    pub fn has_expire(&self, e: Ref) -> bool {
        entry_flags(&self.arena, e) & FLAG_EXPIRE != 0
    }
    /// Absolute expire time in ms, if the key has one.
    pub fn expire_at(&self, e: Ref) -> Option<i64> {
        if !self.has_expire(e) {
            return None;
        }
        let off =
            ENTRY_HEADER_BYTES + entry_key_len(&self.arena, e) + entry_val_len(&self.arena, e);
        Some(self.arena.read_u64(e, off) as i64)
    }
    pub fn lru(&self, e: Ref) -> u32 {
        self.arena.read_u32(e, OFF_LRU)
    }
    pub fn set_lru(&mut self, e: Ref, v: u32) {
        self.arena.write_u32(e, OFF_LRU, v)
    }
    /// Bytes the entry takes in the arena (its block's class size).
    pub fn entry_alloc_bytes(&self, e: Ref) -> usize {
        let block = self.big_block(e).map_or(0, |b| {
            crate::arena::size_class(BIG_HDR + self.arena.read_u32(b, 0) as usize).1
        });
        crate::arena::size_class(entry_size(&self.arena, e)).1 + block
    }

    /// Replaces entry `e` of `db` by `n` (same key, TTL moved along) and frees `e`'s
    /// block without releasing anything its value owned (the caller took care of it).
    fn swap_entry_block(&mut self, db: usize, e: Ref, n: Ref) {
        let h = self.arena.hash(self.key(e));
        let mut dbh = self.read_db(db);
        dbh.dict.replace(&mut self.arena, e, n, h);
        if self.has_expire(e) {
            let idx = self.arena.read_u32(e, OFF_VIDX);
            dbh.volatile.set(&mut self.arena, idx as usize, n);
            self.arena.write_u32(n, OFF_VIDX, idx);
        }
        self.write_db(db, &dbh);
        let size = entry_size(&self.arena, e);
        self.arena.free(e, size);
    }

    /// The access field a newly created value gets (LRU clock now, or LFU_INIT_VAL).
    pub fn initial_lru(&self) -> u32 {
        if self.lfu {
            (self.access_lfu_minutes() << 8) | LFU_INIT_VAL
        } else {
            self.access_lru_clock()
        }
    }

    fn access_now_ms(&self) -> i64 {
        if self.access_clock_ms > 0 {
            self.access_clock_ms
        } else {
            crate::util::now_ms()
        }
    }

    /// [`lru_clock`] at the access clock.
    fn access_lru_clock(&self) -> u32 {
        ((self.access_now_ms() / 1000) as u32) & LRU_CLOCK_MAX
    }

    /// [`lfu_minutes`] at the access clock.
    fn access_lfu_minutes(&self) -> u32 {
        ((self.access_now_ms() / 60_000) as u32) & 0xFFFF
    }

    /// Records an access (LRU clock or LFU counter), as Redis's lookupKey does.
    pub fn touch(&mut self, e: Ref) {
        if entry_flags(&self.arena, e) & tiered::FLAG_TMARK != 0 {
            self.arena.bytes_mut(e, OFF_FLAGS, 1)[0] &= !tiered::FLAG_TMARK;
        }
        let v = if self.lfu {
            let counter = self.lfu_decr_and_return(e);
            let counter = self.lfu_log_incr(counter);
            (self.access_lfu_minutes() << 8) | counter
        } else {
            self.access_lru_clock()
        };
        self.set_lru(e, v);
    }

    /// LFU counter after decay (Redis's LFUDecrAndReturn).
    pub fn lfu_decr_and_return(&self, e: Ref) -> u32 {
        let v = self.lru(e);
        let ldt = v >> 8;
        let counter = v & 0xFF;
        let now = self.access_lfu_minutes();
        let elapsed = if now >= ldt {
            now - ldt
        } else {
            65535 - ldt + now
        };
        let periods = elapsed.checked_div(self.lfu_decay_time_min).unwrap_or(0);
        counter.saturating_sub(periods)
    }

    fn lfu_log_incr(&mut self, counter: u32) -> u32 {
        if counter == 255 {
            return 255;
        }
        let r = (self.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        let base = counter.saturating_sub(LFU_INIT_VAL) as f64;
        let p = 1.0 / (base * self.lfu_log_factor as f64 + 1.0);
        if r < p {
            counter + 1
        } else {
            counter
        }
    }

    // ---- lookups ---------------------------------------------------------------------

    /// First stage of a batched lookup: prefetch `key`'s bucket slot; returns the hash
    /// for [`Keyspace::prefetch_entry`].
    #[inline]
    pub fn prefetch_bucket(&self, db: usize, key: &[u8]) -> u64 {
        let h = self.arena.hash(key);
        if db < self.num_dbs {
            self.read_db(db).dict.prefetch_bucket(&self.arena, h);
        }
        h
    }

    /// Lets lookups of exactly these key bytes (same address and length) reuse the hash
    /// [`Keyspace::prefetch_bucket`] returned for them. The caller guarantees the bytes do
    /// not change until [`Keyspace::clear_key_hash_hint`] (they are a parsed request's
    /// argument in the query buffer, borrowed for the whole batch).
    #[inline]
    pub fn set_key_hash_hint(&mut self, key: &[u8], hash: u64) {
        self.key_hash_hint = Some((key.as_ptr() as usize, key.len(), hash));
    }
    #[inline]
    pub fn clear_key_hash_hint(&mut self) {
        self.key_hash_hint = None;
    }

    /// Second stage: prefetch the first entry of the bucket chain.
    #[inline]
    pub fn prefetch_entry(&self, db: usize, hash: u64) {
        if db < self.num_dbs {
            self.read_db(db).dict.prefetch_entry(&self.arena, hash);
        }
    }

    /// Finds a key without expiring it or touching its access time.
    pub fn find_raw(&self, db: usize, key: &[u8]) -> Option<Ref> {
        let h = match self.key_hash_hint {
            Some((addr, len, h)) if addr == key.as_ptr() as usize && len == key.len() => h,
            _ => self.arena.hash(key),
        };
        self.read_db(db).dict.find(&self.arena, key, h)
    }

    /// True if the entry's TTL has passed (Redis: now > when).
    pub fn is_expired(&self, e: Ref, now_ms: i64) -> bool {
        !self.loading && matches!(self.expire_at(e), Some(t) if now_ms > t)
    }

    /// Deletes an entry for expiry or eviction (`why`), queueing its key for propagation
    /// and for keyspace notifications.
    pub fn delete_and_propagate(&mut self, db: usize, e: Ref, why: events::KeyEventKind) {
        self.record_entry_event(why, db, e);
        if self.deletions.is_some() {
            let key = self.key(e).to_vec();
            if let Some(q) = self.deletions.as_mut() {
                q.push((db, key));
            }
        }
        self.delete_entry(db, e);
    }

    /// Finds a live key, deleting it first if it has expired (lazy expiry).
    pub fn find(&mut self, db: usize, key: &[u8], now_ms: i64) -> Option<Ref> {
        let e = self.find_raw(db, key)?;
        if self.is_expired(e, now_ms) {
            if self.expiry_held {
                return None;
            }
            self.delete_and_propagate(db, e, events::KeyEventKind::Expired);
            self.stats.expired_keys += 1;
            return None;
        }
        if entry_flags(&self.arena, e) & tiered::FLAG_COLD != 0 && !self.tier.cold_ok {
            return self.warm_now(db, e);
        }
        if self.tier.reader.is_some()
            && !self.tier.cold_ok
            && !self.tier.cold_parts_ok
            && self.cold_part_count(e) > 0
        {
            return self.warm_parts_now(db, e);
        }
        Some(e)
    }

    /// A read lookup: lazy expiry, hit/miss stats and an access-time touch.
    pub fn lookup_read(&mut self, db: usize, key: &[u8], now_ms: i64) -> Option<Ref> {
        match self.find(db, key, now_ms) {
            Some(e) => {
                self.stats.hits += 1;
                self.touch(e);
                Some(e)
            }
            None => {
                self.stats.misses += 1;
                self.record_event(events::KeyEventKind::KeyMiss, db, key);
                None
            }
        }
    }

    /// A write lookup: lazy expiry and a touch, no hit/miss stats.
    pub fn lookup_write(&mut self, db: usize, key: &[u8], now_ms: i64) -> Option<Ref> {
        let e = self.find(db, key, now_ms)?;
        self.touch(e);
        Some(e)
    }

    // ---- writes ------------------------------------------------------------------------

    fn write_new_entry(
        &mut self,
        key: &[u8],
        kind: Kind,
        enc: u8,
        value: &[u8],
        expire: Option<i64>,
        lru: u32,
    ) -> Ref {
        let big = kind == Kind::String && value.len() >= BIG_VALUE_BYTES;
        let block = if big {
            Some(self.new_block(value, value.len()))
        } else {
            None
        };
        let inline_len = if big { 4 } else { value.len() };
        let size = entry_bytes(key.len(), inline_len, expire.is_some());
        let e = self.arena.alloc(size);
        let a = &mut self.arena;
        a.write_u32(e, 0, NULL);
        a.write_u32(e, 4, key.len() as u32);
        a.write_u32(e, OFF_VAL_LEN, inline_len as u32);
        a.write_u32(e, OFF_LRU, lru);
        let hdr = a.bytes_mut(e, OFF_KIND, 4);
        hdr[0] = kind as u8;
        hdr[1] = enc;
        hdr[2] = if expire.is_some() { FLAG_EXPIRE } else { 0 } | if big { FLAG_BIG } else { 0 };
        hdr[3] = 0;
        a.write_u32(e, OFF_VIDX, u32::MAX);
        a.bytes_mut(e, ENTRY_HEADER_BYTES, key.len())
            .copy_from_slice(key);
        match block {
            Some(b) => a.write_u32(e, ENTRY_HEADER_BYTES + key.len(), b),
            None => a
                .bytes_mut(e, ENTRY_HEADER_BYTES + key.len(), value.len())
                .copy_from_slice(value),
        }
        if let Some(t) = expire {
            a.write_u64(e, ENTRY_HEADER_BYTES + key.len() + inline_len, t as u64);
        }
        e
    }

    /// Sets `key` to a string value. Returns the new entry.
    pub fn set_string(
        &mut self,
        db: usize,
        key: &[u8],
        value: &[u8],
        enc: StrEnc,
        ttl: Ttl,
    ) -> Ref {
        self.set_value(db, key, Kind::String, enc as u8, value, ttl)
    }

    /// Sets `key` to a value of any kind (the bytes are the kind's own encoding).
    pub fn set_value(
        &mut self,
        db: usize,
        key: &[u8],
        kind: Kind,
        enc: u8,
        value: &[u8],
        ttl: Ttl,
    ) -> Ref {
        let h = self.arena.hash(key);
        let mut dbh = self.read_db(db);
        let old = dbh.dict.find(&self.arena, key, h);
        let old_expire = old.and_then(|o| self.expire_at(o));
        let expire = match ttl {
            Ttl::Clear => None,
            Ttl::Keep => old_expire,
            Ttl::At(t) => Some(t),
        };
        // As Redis's dbSetValue: a new value gets a fresh access time, but keeps the old
        // value's LFU counter so overwriting a hot key does not make it look cold.
        let lru = match old {
            Some(o) if self.lfu => self.lru(o),
            _ => self.initial_lru(),
        };
        if let Some(o) = old {
            if self.overwrite_string_in_place(o, key.len(), kind, enc, value, expire, lru) {
                return o;
            }
        }
        let e = self.write_new_entry(key, kind, enc, value, expire, lru);
        match old {
            Some(o) => {
                dbh.dict.replace(&mut self.arena, o, e, h);
                self.fix_volatile_after_move(
                    &mut dbh,
                    o,
                    e,
                    old_expire.is_some(),
                    expire.is_some(),
                );
                if free_entry(&mut self.arena, self.values, &self.pins, &mut self.tier, o) {
                    self.lazyfree_pending += 1;
                }
            }
            None => {
                self.record_event(events::KeyEventKind::New, db, key);
                dbh.dict.insert_new(&mut self.arena, e, h);
                if expire.is_some() {
                    let idx = dbh.volatile.push(&mut self.arena, e);
                    self.arena.write_u32(e, OFF_VIDX, idx as u32);
                }
            }
        }
        self.write_db(db, &dbh);
        e
    }

    /// Overwrites string entry `e`'s value in its own block when the new entry would have
    /// the same size class and the same layout (inline value; TTL or none as before), so a
    /// SET of an existing key writes one block instead of allocating another, relinking
    /// its hash chain and freeing the old one. Why it matters beyond the allocator: a
    /// snapshot re-sends every page written since its last pass, and an overwrite touches
    /// one page where a move touches three (the new block, the chain link, the freed
    /// block's free-list link). Returns false (nothing changed) when it does not apply.
    #[allow(clippy::too_many_arguments)]
    fn overwrite_string_in_place(
        &mut self,
        e: Ref,
        key_len: usize,
        kind: Kind,
        enc: u8,
        value: &[u8],
        expire: Option<i64>,
        lru: u32,
    ) -> bool {
        let a = &mut self.arena;
        let flags = entry_flags(a, e);
        if kind != Kind::String
            || value.len() >= BIG_VALUE_BYTES
            || a.bytes(e, OFF_KIND, 1)[0] != Kind::String as u8
            || flags & (FLAG_BIG | tiered::FLAG_COLD) != 0
            || (flags & FLAG_EXPIRE != 0) != expire.is_some()
        {
            return false;
        }
        let old_size = entry_size(a, e);
        let new_size = entry_bytes(key_len, value.len(), expire.is_some());
        if crate::arena::size_class(old_size).0 != crate::arena::size_class(new_size).0 {
            return false;
        }
        let same = a.realloc(e, old_size, new_size);
        debug_assert_eq!(same, e, "a same-class realloc stays in place");
        // A new value: no copy on disk matches it any more.
        a.bytes_mut(e, OFF_FLAGS, 1)[0] &= !tiered::TIER_FLAGS;
        a.write_u32(e, OFF_VAL_LEN, value.len() as u32);
        a.write_u32(e, OFF_LRU, lru);
        a.bytes_mut(e, OFF_ENC, 1)[0] = enc;
        a.bytes_mut(e, ENTRY_HEADER_BYTES + key_len, value.len())
            .copy_from_slice(value);
        if let Some(t) = expire {
            a.write_u64(e, ENTRY_HEADER_BYTES + key_len + value.len(), t as u64);
        }
        debug_assert_eq!(entry_size(a, e), new_size);
        true
    }

    /// After entry `old` was replaced by `new` keep the volatile index pointing right.
    fn fix_volatile_after_move(
        &mut self,
        dbh: &mut DbHeader,
        old: Ref,
        new: Ref,
        old_vol: bool,
        new_vol: bool,
    ) {
        match (old_vol, new_vol) {
            (true, true) => {
                let idx = self.arena.read_u32(old, OFF_VIDX);
                dbh.volatile.set(&mut self.arena, idx as usize, new);
                self.arena.write_u32(new, OFF_VIDX, idx);
            }
            (true, false) => {
                let idx = self.arena.read_u32(old, OFF_VIDX) as usize;
                self.volatile_remove(dbh, idx);
            }
            (false, true) => {
                let idx = dbh.volatile.push(&mut self.arena, new);
                self.arena.write_u32(new, OFF_VIDX, idx as u32);
            }
            (false, false) => {}
        }
    }

    fn volatile_remove(&mut self, dbh: &mut DbHeader, idx: usize) {
        if let Some(moved) = dbh.volatile.swap_remove(&mut self.arena, idx) {
            self.arena.write_u32(moved, OFF_VIDX, idx as u32);
        }
    }

    /// Replaces an existing entry's value bytes in place when the size allows, else moves
    /// it. TTL and access time are kept. Returns the (possibly new) entry.
    pub fn resize_value(&mut self, db: usize, e: Ref, new_len: usize) -> Ref {
        self.tier_value_changed(e);
        let kl = entry_key_len(&self.arena, e);
        if let Some(b) = self.big_block(e) {
            // Out of line: the entry stays put, only its block changes. A referenced block
            // is never resized in place (copy-on-write).
            let old_len = self.arena.read_u32(b, 0) as usize;
            if old_len == new_len {
                return e;
            }
            let same_class = crate::arena::size_class(BIG_HDR + old_len).0
                == crate::arena::size_class(BIG_HDR + new_len).0;
            if same_class && !self.pins.contains_key(&b) {
                self.arena.realloc(b, BIG_HDR + old_len, BIG_HDR + new_len);
                self.arena.write_u32(b, 0, new_len as u32);
                if new_len > old_len {
                    self.arena
                        .bytes_mut(b, BIG_HDR + old_len, new_len - old_len)
                        .fill(0);
                }
            } else {
                self.replace_block(e, b, new_len);
            }
            return e;
        }
        let vl = entry_val_len(&self.arena, e);
        if vl == new_len {
            return e;
        }
        if new_len >= BIG_VALUE_BYTES && self.kind(e) == Kind::String {
            // Growing past the threshold: rebuild the entry with its value out of line.
            let mut v = self.value(e).to_vec();
            v.resize(new_len, 0);
            let key = self.key(e).to_vec();
            let (kind, enc, lru) = (self.kind(e), self.enc(e), self.lru(e));
            let expire = self.expire_at(e);
            let n = self.write_new_entry(&key, kind, enc, &v, expire, lru);
            self.swap_entry_block(db, e, n);
            return n;
        }
        let expire = self.expire_at(e);
        let old_size = entry_bytes(kl, vl, expire.is_some());
        let new_size = entry_bytes(kl, new_len, expire.is_some());
        if crate::arena::size_class(old_size).0 == crate::arena::size_class(new_size).0 {
            self.arena.realloc(e, old_size, new_size);
            self.arena.write_u32(e, OFF_VAL_LEN, new_len as u32);
            if new_len > vl {
                self.arena
                    .bytes_mut(e, ENTRY_HEADER_BYTES + kl + vl, new_len - vl)
                    .fill(0);
            }
            if let Some(t) = expire {
                self.arena
                    .write_u64(e, ENTRY_HEADER_BYTES + kl + new_len, t as u64);
            }
            return e;
        }
        let n = self.arena.alloc(new_size);
        let keep = ENTRY_HEADER_BYTES + kl + vl.min(new_len);
        self.arena.copy_within(e, 0, n, 0, keep);
        self.arena.write_u32(n, OFF_VAL_LEN, new_len as u32);
        if new_len > vl {
            self.arena
                .bytes_mut(n, ENTRY_HEADER_BYTES + kl + vl, new_len - vl)
                .fill(0);
        }
        if let Some(t) = expire {
            self.arena
                .write_u64(n, ENTRY_HEADER_BYTES + kl + new_len, t as u64);
        }
        let h = self.arena.hash(self.key(e));
        let mut dbh = self.read_db(db);
        dbh.dict.replace(&mut self.arena, e, n, h);
        if expire.is_some() {
            let idx = self.arena.read_u32(e, OFF_VIDX);
            dbh.volatile.set(&mut self.arena, idx as usize, n);
        }
        self.write_db(db, &dbh);
        self.arena.free(e, old_size);
        n
    }

    /// Sets or clears the TTL of an existing entry. Returns the (possibly moved) entry.
    pub fn set_expire(&mut self, db: usize, e: Ref, expire: Option<i64>) -> Ref {
        let had = self.has_expire(e);
        match (had, expire) {
            (true, Some(t)) => {
                let off = ENTRY_HEADER_BYTES
                    + entry_key_len(&self.arena, e)
                    + entry_val_len(&self.arena, e);
                self.arena.write_u64(e, off, t as u64);
                e
            }
            (false, None) => e,
            _ => {
                let kl = entry_key_len(&self.arena, e);
                let vl = entry_val_len(&self.arena, e);
                let old_size = entry_bytes(kl, vl, had);
                let new_size = entry_bytes(kl, vl, expire.is_some());
                let n = self.arena.alloc(new_size);
                self.arena
                    .copy_within(e, 0, n, 0, ENTRY_HEADER_BYTES + kl + vl);
                let flags = &mut self.arena.bytes_mut(n, OFF_FLAGS, 1)[0];
                if let Some(t) = expire {
                    *flags |= FLAG_EXPIRE;
                    self.arena
                        .write_u64(n, ENTRY_HEADER_BYTES + kl + vl, t as u64);
                } else {
                    *flags &= !FLAG_EXPIRE;
                }
                let h = self.arena.hash(self.key(e));
                let mut dbh = self.read_db(db);
                dbh.dict.replace(&mut self.arena, e, n, h);
                self.fix_volatile_after_move(&mut dbh, e, n, had, expire.is_some());
                self.write_db(db, &dbh);
                self.arena.free(e, old_size);
                n
            }
        }
    }

    /// Unlinks and frees an entry.
    pub fn delete_entry(&mut self, db: usize, e: Ref) {
        // A deleted key is a modified key for WATCH (DEL of several keys touches only
        // those that existed, as Redis).
        if !self.watch.is_empty() || !self.tracking.is_off() {
            let key = self.key(e).to_vec();
            self.watch.touch(db, &key);
            self.tracking.touch(&key);
        }
        let h = self.arena.hash(self.key(e));
        let mut dbh = self.read_db(db);
        dbh.dict.unlink(&mut self.arena, e, h);
        if self.has_expire(e) {
            let idx = self.arena.read_u32(e, OFF_VIDX) as usize;
            self.volatile_remove(&mut dbh, idx);
        }
        self.write_db(db, &dbh);
        if free_entry(&mut self.arena, self.values, &self.pins, &mut self.tier, e) {
            self.lazyfree_pending += 1;
        }
    }

    /// Deletes a key (expired keys count as absent). Returns whether a live key was removed.
    pub fn delete(&mut self, db: usize, key: &[u8], now_ms: i64) -> bool {
        match self.find(db, key, now_ms) {
            Some(e) => {
                self.delete_entry(db, e);
                true
            }
            None => false,
        }
    }

    /// Deletes a key even if its TTL has passed, without a lookup (Redis's dbDelete, which
    /// store commands use for an empty result: `del`, never `expired`). Returns whether a
    /// key was there.
    pub fn delete_no_lookup(&mut self, db: usize, key: &[u8]) -> bool {
        match self.find_raw(db, key) {
            Some(e) => {
                self.delete_entry(db, e);
                true
            }
            None => false,
        }
    }

    /// Copies entry `e` under a new key/db (RENAME, COPY, MOVE). The source stays.
    /// `ttl` decides the copy's TTL. An existing destination key must be deleted first.
    pub fn clone_entry_to(&mut self, e: Ref, dst_db: usize, dst_key: &[u8], ttl: Ttl) -> Ref {
        let kind = self.kind(e);
        let enc = self.arena.bytes(e, OFF_ENC, 1)[0];
        let lru = self.lru(e);
        let expire = match ttl {
            Ttl::Keep => self.expire_at(e),
            Ttl::Clear => None,
            Ttl::At(t) => Some(t),
        };
        // The value is copied through a temporary: the source may move while we allocate.
        // Collections deep-copy their out-of-line structures.
        let value = self.value(e).to_vec();
        let value = (self.values.clone)(&mut self.arena, kind, &value);
        let n = self.write_new_entry(dst_key, kind, enc, &value, expire, lru);
        let h = self.arena.hash(dst_key);
        let mut dbh = self.read_db(dst_db);
        debug_assert!(dbh.dict.find(&self.arena, dst_key, h).is_none());
        dbh.dict.insert_new(&mut self.arena, n, h);
        self.record_event(events::KeyEventKind::New, dst_db, dst_key);
        if expire.is_some() {
            let idx = dbh.volatile.push(&mut self.arena, n);
            self.arena.write_u32(n, OFF_VIDX, idx as u32);
        }
        self.write_db(dst_db, &dbh);
        n
    }

    /// Moves entry `e` of `src_db` to `dst_key` in `dst_db` (RENAME, MOVE) in O(1) for any
    /// value size: the entry block is copied but a collection's out-of-line structures
    /// change owner instead of being deep-copied. TTL and access time move along. An
    /// existing destination key must be deleted first. Returns the new entry.
    pub fn move_entry_to(&mut self, src_db: usize, e: Ref, dst_db: usize, dst_key: &[u8]) -> Ref {
        let kind = self.kind(e);
        let enc = self.enc(e);
        let lru = self.lru(e);
        let expire = self.expire_at(e);
        let value = self.value(e).to_vec();
        let n = self.write_new_entry(dst_key, kind, enc, &value, expire, lru);
        let h = self.arena.hash(dst_key);
        let mut dbh = self.read_db(dst_db);
        dbh.dict.insert_new(&mut self.arena, n, h);
        self.record_event(events::KeyEventKind::New, dst_db, dst_key);
        if expire.is_some() {
            let idx = dbh.volatile.push(&mut self.arena, n);
            self.arena.write_u32(n, OFF_VIDX, idx as u32);
        }
        self.write_db(dst_db, &dbh);
        // Unlink the source without releasing its value (now owned by `n`).
        // (Arena allocations and dict inserts never move existing blocks, so `e` is still
        // the source entry.)
        let h = self.arena.hash(self.key(e));
        let mut dbh = self.read_db(src_db);
        dbh.dict.unlink(&mut self.arena, e, h);
        if self.has_expire(e) {
            let idx = self.arena.read_u32(e, OFF_VIDX) as usize;
            self.volatile_remove(&mut dbh, idx);
        }
        self.write_db(src_db, &dbh);
        let size = entry_size(&self.arena, e);
        self.arena.free(e, size);
        n
    }

    /// Redis's touchAllWatchedKeysInDb: `db` is emptied (and replaced by `with`'s
    /// content for SWAPDB); a watched key that exists in either changes.
    /// O(watched keys of the db), not of the dataset.
    fn touch_watched_in_db(&mut self, db: usize, with: Option<usize>) {
        if self.watch.is_empty() {
            return;
        }
        for key in self.watch.keys_in_db(db) {
            let exists = self.find_raw(db, &key).is_some()
                || with.is_some_and(|w| self.find_raw(w, &key).is_some());
            if exists {
                self.watch.touch(db, &key);
            }
        }
    }

    /// Swaps two databases (SWAPDB): O(1), only the headers move.
    pub fn swap_dbs(&mut self, a: usize, b: usize) {
        // Swapping a database with itself changes nothing (Redis touches no key either).
        if a == b {
            return;
        }
        self.touch_watched_in_db(a, Some(b));
        self.touch_watched_in_db(b, Some(a));
        let ha = self.read_db(a);
        let hb = self.read_db(b);
        self.write_db(a, &hb);
        self.write_db(b, &ha);
    }

    /// Empties a database in O(1): its tables move to the graveyard, freed in slices by
    /// [`Keyspace::lazyfree_step`]. Returns the number of keys it had.
    pub fn flush_db(&mut self, db: usize) -> u64 {
        self.touch_watched_in_db(db, None);
        self.tracking.flush();
        let old = self.read_db(db);
        let n = old.dict.len();
        self.write_db(db, &Self::empty_db());
        if old.dict.buckets() == 0 && old.volatile.dir == NULL {
            return n;
        }
        let node = self.arena.alloc(std::mem::size_of::<GraveNode>());
        let head = self.arena.root(ROOT_GRAVEYARD) as Ref;
        self.arena.write(
            node,
            &GraveNode {
                next: head,
                _pad: 0,
                db: old,
            },
        );
        self.arena.set_root(ROOT_GRAVEYARD, node as u64);
        self.lazyfree_pending += n;
        n
    }

    /// Frees up to `budget` entries of flushed databases. Returns true if work remains.
    /// Big single values (deleted or overwritten collections) are freed here too, node by
    /// node, before flushed databases.
    pub fn lazyfree_step(&mut self, budget: usize) -> bool {
        let mut nodes = Vec::new();
        let (blocks, values, more) =
            (self.values.lazyfree_step)(&mut self.arena, budget, &mut nodes);
        self.tier.on_free_nodes(nodes);
        self.lazyfree_pending -= values.min(self.lazyfree_pending);
        self.stats.lazyfreed_objects += values;
        if blocks > 0 || more {
            return more || self.arena.root(ROOT_GRAVEYARD) as Ref != NULL;
        }
        let node = self.arena.root(ROOT_GRAVEYARD) as Ref;
        if node == NULL {
            return false;
        }
        let mut g: GraveNode = self.arena.read(node);
        let before = g.db.dict.len();
        let mut graved = 0u64;
        let (pins, ops, tier) = (&self.pins, self.values, &mut self.tier);
        let done = g.db.dict.destroy_some(&mut self.arena, budget, |a, e| {
            if free_entry(a, ops, pins, tier, e) {
                graved += 1;
            }
        });
        self.lazyfree_pending += graved;
        let freed = before - g.db.dict.len();
        self.lazyfree_pending -= freed.min(self.lazyfree_pending);
        self.stats.lazyfreed_objects += freed;
        if done {
            g.db.volatile.free_all(&mut self.arena);
            self.arena.set_root(ROOT_GRAVEYARD, g.next as u64);
            self.arena.free(node, std::mem::size_of::<GraveNode>());
        } else {
            self.arena.write(node, &g);
        }
        self.arena.root(ROOT_GRAVEYARD) as Ref != NULL
            || self.arena.root(ROOT_VALUE_GRAVEYARD) as Ref != NULL
    }

    /// Incremental rehash work for every db, and shrinking of sparse tables (cron).
    pub fn rehash_step_all(&mut self, steps: usize) -> bool {
        let mut more = false;
        for db in 0..self.num_dbs {
            let mut h = self.read_db(db);
            if !h.dict.is_rehashing() {
                h.dict.shrink_if_sparse(&mut self.arena);
            }
            if h.dict.is_rehashing() {
                more |= h.dict.rehash_step(&mut self.arena, steps);
            }
            self.write_db(db, &h);
        }
        more
    }

    // ---- iteration and sampling ------------------------------------------------------------

    /// One SCAN step over db; `f` gets each entry of the visited buckets.
    pub fn scan(&self, db: usize, cursor: u64, f: impl FnMut(Ref)) -> u64 {
        self.read_db(db).dict.scan(&self.arena, cursor, f)
    }

    /// A uniformly random entry of db (may be expired; callers check).
    pub fn random_entry(&mut self, db: usize) -> Option<Ref> {
        let h = self.read_db(db);
        h.dict.random(&self.arena, &mut self.rng)
    }

    /// A uniformly random entry among keys with a TTL.
    pub fn random_volatile(&mut self, db: usize) -> Option<Ref> {
        let h = self.read_db(db);
        if h.volatile.is_empty() {
            return None;
        }
        let i = self.rng.below(h.volatile.len() as u64) as usize;
        Some(h.volatile.get(&self.arena, i))
    }

    /// Average TTL (ms) over a sample of volatile keys, for INFO keyspace's avg_ttl.
    pub fn avg_ttl_ms(&mut self, db: usize, now_ms: i64) -> i64 {
        let n = self.volatile_count(db).min(20);
        if n == 0 {
            return 0;
        }
        let mut sum = 0i64;
        let mut count = 0i64;
        for _ in 0..n {
            if let Some(e) = self.random_volatile(db) {
                if let Some(t) = self.expire_at(e) {
                    sum += (t - now_ms).max(0);
                    count += 1;
                }
            }
        }
        if count == 0 {
            0
        } else {
            sum / count
        }
    }

    /// Bytes of index structures (bucket arrays) across dbs.
    pub fn index_bytes(&self) -> u64 {
        (0..self.num_dbs)
            .map(|d| self.read_db(d).dict.table_bytes())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ks() -> Keyspace {
        crate::collections::new_keyspace(Arena::new(1 << 30, [9, 9]).unwrap(), 4)
    }

    #[test]
    fn big_values_pin_cow_and_orphans() {
        let mut k = ks();
        let base = k.arena.used_bytes();
        let big: Vec<u8> = (0..100_000u32).map(|i| i as u8).collect();
        let e = k.set_string(0, b"k", &big, StrEnc::Raw, Ttl::Clear);
        assert!(k.is_big(e));
        assert_eq!(k.value(e), &big[..]);
        let (b, len) = k.pin_value(e).unwrap();
        assert_eq!(len, big.len());
        // Copy-on-write: writing through value_mut leaves the pinned block intact.
        k.value_mut(e)[0] = 0xFF;
        let pinned = unsafe { std::slice::from_raw_parts(k.block_ptr(b), len) };
        assert_eq!(pinned, &big[..]);
        assert_eq!(k.value(e)[0], 0xFF);
        // Resize (APPEND) copies too; then TTL moves the entry, keeping its block.
        let e = k.find_raw(0, b"k").unwrap();
        let (b2, _) = k.pin_value(e).unwrap();
        let e = k.resize_value(0, e, 200_000);
        assert_eq!(k.value(e).len(), 200_000);
        let e = k.set_expire(0, e, Some(i64::MAX));
        assert_eq!(k.value(e)[1], 1);
        // Overwrite and flush: the pinned blocks survive as orphans until unpinned.
        k.set_string(0, b"k", b"small", StrEnc::Embstr, Ttl::Clear);
        assert_eq!(k.pinned_blocks(), 2);
        assert_eq!(unsafe { *k.block_ptr(b).add(7) }, 7);
        k.unpin(b2);
        k.unpin(b);
        assert_eq!(k.pinned_blocks(), 0);
        assert_eq!(k.arena.root(ROOT_ORPHANS), NULL as u64);
        // Growing a small value past the threshold moves it out of line.
        let e = k.find_raw(0, b"k").unwrap();
        let e = k.resize_value(0, e, 50_000);
        assert!(k.is_big(e));
        assert_eq!(&k.value(e)[..5], b"small");
        let e = k.set_string(0, b"j", &big, StrEnc::Raw, Ttl::Clear);
        let (b3, _) = k.pin_value(e).unwrap();
        k.flush_db(0);
        while k.lazyfree_step(1024) {}
        assert_eq!(unsafe { *k.block_ptr(b3).add(9) }, 9);
        k.unpin(b3);
        assert_eq!(k.arena.used_bytes(), base);
    }

    #[test]
    fn set_get_overwrite_delete() {
        let mut k = ks();
        let used0 = k.arena.used_bytes();
        k.set_string(0, b"a", b"1", StrEnc::Int, Ttl::Clear);
        let e = k.find(0, b"a", 0).unwrap();
        assert_eq!(k.value(e), b"1");
        assert_eq!(k.str_enc(e), StrEnc::Int);
        k.set_string(0, b"a", &[b'x'; 1000], StrEnc::Raw, Ttl::Clear);
        let e = k.find(0, b"a", 0).unwrap();
        assert_eq!(k.value(e).len(), 1000);
        assert!(k.find(1, b"a", 0).is_none());
        assert!(k.delete(0, b"a", 0));
        assert!(!k.delete(0, b"a", 0));
        assert_eq!(k.dbsize(0), 0);
        // Only the initial bucket array stays.
        assert!(k.arena.used_bytes() - used0 <= 64);
    }

    #[test]
    fn overwrites_of_the_same_size_class_stay_in_place() {
        let mut k = ks();
        let e = k.set_string(0, b"key", &[b'a'; 500], StrEnc::Raw, Ttl::Clear);
        let used = k.arena.used_bytes();
        // Same class (500 and 498 bytes of value): the same block, the new bytes.
        let e2 = k.set_string(0, b"key", &[b'b'; 498], StrEnc::Raw, Ttl::Clear);
        assert_eq!(e2, e);
        assert_eq!(k.value(e), &[b'b'; 498][..]);
        assert_eq!(k.arena.used_bytes(), used);
        // An int encoding is recorded as well.
        k.set_string(0, b"key", b"12", StrEnc::Int, Ttl::Clear);
        let e3 = k.find_raw(0, b"key").unwrap();
        assert_ne!(e3, e, "2 bytes is another size class: moved");
        assert_eq!((k.value(e3), k.str_enc(e3)), (&b"12"[..], StrEnc::Int));
        // With a TTL before and after: in place, the new deadline, still indexed.
        let e = k.set_string(0, b"t", &[b'x'; 100], StrEnc::Raw, Ttl::At(5000));
        let e2 = k.set_string(0, b"t", &[b'y'; 100], StrEnc::Raw, Ttl::At(7000));
        assert_eq!(e2, e);
        assert_eq!(k.expire_at(e), Some(7000));
        assert_eq!(k.value(e), &[b'y'; 100][..]);
        assert_eq!(k.volatile_count(0), 1);
        assert_eq!(k.random_volatile(0), Some(e));
        // KEEPTTL keeps it; dropping the TTL changes the layout: moved, unindexed.
        let e2 = k.set_string(0, b"t", &[b'z'; 100], StrEnc::Raw, Ttl::Keep);
        assert_eq!((e2, k.expire_at(e2)), (e, Some(7000)));
        let e3 = k.set_string(0, b"t", &[b'w'; 100], StrEnc::Raw, Ttl::Clear);
        assert_ne!(e3, e);
        assert_eq!((k.expire_at(e3), k.volatile_count(0)), (None, 0));
        assert!(k
            .find(0, b"t", 0)
            .is_some_and(|x| k.value(x) == &[b'w'; 100][..]));
        assert_eq!(k.dbsize(0), 2);
    }

    #[test]
    fn ttl_moves_keep_volatile_index_consistent() {
        let mut k = ks();
        for i in 0..1000 {
            let key = format!("k{i}");
            k.set_string(0, key.as_bytes(), b"v", StrEnc::Embstr, Ttl::At(1000 + i));
        }
        assert_eq!(k.volatile_count(0), 1000);
        // Persist half, grow the values of a quarter (entries move), delete some.
        for i in (0..1000).step_by(2) {
            let e = k.find_raw(0, format!("k{i}").as_bytes()).unwrap();
            k.set_expire(0, e, None);
        }
        assert_eq!(k.volatile_count(0), 500);
        for i in (1..1000).step_by(4) {
            let e = k.find_raw(0, format!("k{i}").as_bytes()).unwrap();
            let e = k.resize_value(0, e, 300);
            assert_eq!(k.expire_at(e), Some(1000 + i));
        }
        for i in (3..1000).step_by(4) {
            assert!(k.delete(0, format!("k{i}").as_bytes(), 0));
        }
        assert_eq!(k.volatile_count(0), 250);
        for _ in 0..200 {
            let e = k.random_volatile(0).unwrap();
            assert!(k.expire_at(e).is_some());
            let key = k.key(e).to_vec();
            assert_eq!(k.find_raw(0, &key), Some(e));
        }
        // Lazy expiry.
        assert!(k.find(0, b"k1", 2000).is_none());
        assert_eq!(k.stats.expired_keys, 1);
    }

    #[test]
    fn flush_frees_in_slices() {
        let mut k = ks();
        let used0 = k.arena.used_bytes();
        for i in 0..20_000 {
            k.set_string(
                2,
                format!("k{i}").as_bytes(),
                b"value",
                StrEnc::Embstr,
                Ttl::At(i),
            );
        }
        assert_eq!(k.flush_db(2), 20_000);
        assert_eq!(k.dbsize(2), 0);
        let mut slices = 0;
        while k.lazyfree_step(1000) {
            slices += 1;
        }
        assert!(slices >= 19);
        // The fresh db allocates nothing until used, so all memory is back.
        assert_eq!(k.arena.used_bytes(), used0);
    }

    #[test]
    fn swapdb_and_clone() {
        let mut k = ks();
        k.set_string(0, b"x", b"0", StrEnc::Int, Ttl::At(5000));
        let e = k.find_raw(0, b"x").unwrap();
        k.clone_entry_to(e, 1, b"y", Ttl::Keep);
        k.swap_dbs(0, 1);
        let y = k.find_raw(0, b"y").unwrap();
        assert_eq!(k.expire_at(y), Some(5000));
        assert!(k.find_raw(1, b"x").is_some());
    }
}
