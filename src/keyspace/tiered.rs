//! The keyspace's side of SSD tiering: an entry whose value (a string, or a collection
//! in a single-block encoding) lives only in the tier file ("cold") keeps its key, TTL,
//! access time, kind and encoding byte in the arena; its value field holds a 16-byte
//! [`ColdStub`] (where the record is in the file) instead of the bytes. The keyspace
//! never does I/O itself: deleting or overwriting a cold entry records its location in
//! [`TierMeta::freed`] for the executor to give back to the bookkeeper, and a lookup
//! that needs the value of a cold entry the executor did not bring back first reads it
//! through [`ColdReader`] (the fallback for keys a command does not declare: scripts'
//! undeclared keys, SORT's BY / GET patterns).
//!
//! Entry flag bits used here (bits 0 and 1 are the keyspace's own):
//! - [`FLAG_COLD`]: the value field is a stub, the bytes are only on disk.
//! - [`FLAG_TMARK`]: the offload pass marked the entry; any access clears it, so an
//!   entry still marked when the pass comes round again has not been used since.
//! - [`FLAG_COOLED`]: the bytes in RAM equal a copy on disk (the executor's cooled
//!   queue holds its location), so the RAM copy can be dropped without a write. Any
//!   change of the value clears it.
//! - [`FLAG_STASHING`]: a write of this value to the tier file is in flight.

use super::{
    entry_flags, entry_key_len, entry_val_len, Keyspace, Kind, Ref, ENTRY_HEADER_BYTES, FLAG_BIG,
    FLAG_EXPIRE, OFF_FLAGS,
};

pub const FLAG_COLD: u8 = 4;
pub const FLAG_TMARK: u8 = 8;
pub const FLAG_COOLED: u8 = 16;
pub const FLAG_STASHING: u8 = 32;
/// Every tier bit. An image carries them as captured; the loader keeps [`FLAG_COLD`]
/// (the stub's record is in the snapshot's companion file) and clears the others, which
/// describe the running server's queues and writes in flight.
pub const TIER_FLAGS: u8 = FLAG_COLD | FLAG_TMARK | FLAG_COOLED | FLAG_STASHING;

/// Payload bytes of a tier file page (its 4 KiB less the 8-byte header; the page format
/// is `persistence::tiered::page`, which checks this equals its own figure). The image
/// validator needs it to check a stub's geometry.
pub const TIER_PAGE_PAYLOAD_BYTES: usize = 4088;
/// Bytes of a record's header (key and value lengths).
pub const TIER_RECORD_HEADER_BYTES: usize = 8;
/// The longest record stored alone in one page (a whole-page record: from one byte
/// over a page's payload up to this; `persistence::tiered::page` checks the figure).
pub const TIER_WHOLE_PAGE_MAX_RECORD_BYTES: usize = 4095;

/// Bytes of a cold entry's value field.
pub const COLD_STUB_BYTES: usize = 16;

/// Where a cold value's record is in the tier file: the record (key and value) starts
/// `offset` bytes into the payload of page `page` and is `record_bytes` long (it may run
/// on into the following pages' payloads); the value is `value_bytes` of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ColdStub {
    pub page: u32,
    pub offset: u32,
    pub record_bytes: u32,
    pub value_bytes: u32,
}

impl ColdStub {
    pub fn encode(&self) -> [u8; COLD_STUB_BYTES] {
        let mut b = [0u8; COLD_STUB_BYTES];
        b[0..4].copy_from_slice(&self.page.to_le_bytes());
        b[4..8].copy_from_slice(&self.offset.to_le_bytes());
        b[8..12].copy_from_slice(&self.record_bytes.to_le_bytes());
        b[12..16].copy_from_slice(&self.value_bytes.to_le_bytes());
        b
    }
    /// Pages of the tier file the record covers (one for a whole-page record).
    pub fn pages(&self) -> u64 {
        let rec = self.record_bytes as usize;
        if rec > TIER_PAGE_PAYLOAD_BYTES && rec <= TIER_WHOLE_PAGE_MAX_RECORD_BYTES {
            return 1;
        }
        (self.offset as u64 + self.record_bytes as u64)
            .div_ceil(TIER_PAGE_PAYLOAD_BYTES as u64)
            .max(1)
    }

    /// Whether the stub could have been written for a key of `key_len` bytes: the record
    /// is the key's and the value's length plus its header; a record that fits a page
    /// lies inside one page's payload, a longer one starts at the payload start of its
    /// own pages. (The image validator's check; the bytes themselves are checked when read.)
    pub fn well_formed(&self, key_len: usize) -> bool {
        let rec = self.record_bytes as u64;
        rec == TIER_RECORD_HEADER_BYTES as u64 + key_len as u64 + self.value_bytes as u64
            && if rec <= TIER_PAGE_PAYLOAD_BYTES as u64 {
                self.offset as u64 + rec <= TIER_PAGE_PAYLOAD_BYTES as u64
            } else {
                self.offset == 0
            }
            && self.page as u64 + self.pages() <= u32::MAX as u64
    }

    pub fn decode(b: &[u8]) -> ColdStub {
        let w = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        ColdStub {
            page: w(0),
            offset: w(4),
            record_bytes: w(8),
            value_bytes: w(12),
        }
    }
}

/// Reads a cold value synchronously (the fallback, see the module comment): the value
/// bytes, checked against the page checksums and the record's key, or why not.
pub trait ColdReader: Send {
    fn read_now(&mut self, key: &[u8], stub: ColdStub) -> Result<Vec<u8>, String>;
}

/// Reads a cold value from wherever its record is (the restore's companion file).
pub type ReadValue<'a> = dyn FnMut(&[u8], ColdStub) -> Result<Vec<u8>, String> + 'a;

/// A value the fallback brought back into RAM: it is still on disk at `stub`, so the
/// executor keeps it as cooled (`value_hash` identifies the bytes it read).
pub struct Rewarmed {
    pub db: usize,
    pub key: Vec<u8>,
    pub stub: ColdStub,
    pub value_hash: u64,
}

/// The keyspace's tier bookkeeping (Rust heap, never in an image).
#[derive(Default)]
pub struct TierMeta {
    /// Locations of cold values deleted, overwritten, expired, evicted or flushed: the
    /// executor frees them in the bookkeeper (no I/O).
    pub freed: Vec<ColdStub>,
    /// Values the fallback read back (see [`Rewarmed`]).
    pub rewarmed: Vec<Rewarmed>,
    /// Cold entries and their values' bytes.
    pub cold_entries: u64,
    pub cold_bytes: u64,
    /// The running command does not need the values of cold entries (DEL, EXISTS, TYPE,
    /// TTL, a plain SET...): lookups leave them cold.
    pub cold_ok: bool,
    /// The running command touches only parts of its values that are in RAM (a push or
    /// a pop without a count, whose end node the gate checked): lookups leave cold parts
    /// (quicklist nodes) cold.
    pub cold_parts_ok: bool,
    /// Cold parts of values (quicklist nodes) and their bytes.
    pub cold_parts: u64,
    pub cold_part_bytes: u64,
    /// The fallback reader (None: tiering off).
    pub reader: Option<Box<dyn ColdReader>>,
    /// Fallback reads, and those that failed (the lookup then answers "no such key" and
    /// the value stays cold, see ARCHITECTURE.md "Tiered store").
    pub sync_reads: u64,
    pub sync_read_errors: u64,
}

impl TierMeta {
    /// A freed entry's share: called for every entry freed (see `free_entry`).
    pub(super) fn on_free(&mut self, a: &crate::arena::Arena, e: Ref) {
        // Without tiering (a keyspace restored from an image with tiered values, whose
        // flushed databases still hold cold entries) there is no tier file to give back to.
        if entry_flags(a, e) & FLAG_COLD == 0 || self.reader.is_none() {
            return;
        }
        let kl = entry_key_len(a, e);
        let stub = ColdStub::decode(a.bytes(e, ENTRY_HEADER_BYTES + kl, COLD_STUB_BYTES));
        self.cold_entries = self.cold_entries.saturating_sub(1);
        self.cold_bytes = self.cold_bytes.saturating_sub(stub.value_bytes as u64);
        self.freed.push(stub);
    }

    /// Record places of cold list nodes freed with their list (see `on_free`).
    pub(super) fn on_free_nodes(&mut self, stubs: Vec<ColdStub>) {
        if self.reader.is_none() {
            return;
        }
        for s in stubs {
            self.cold_parts = self.cold_parts.saturating_sub(1);
            self.cold_part_bytes = self.cold_part_bytes.saturating_sub(s.value_bytes as u64);
            self.freed.push(s);
        }
    }
}

/// The databases a restored arena records (after `validate::validate_image`).
pub fn image_dbs(a: &crate::arena::Arena) -> usize {
    a.root(super::ROOT_NUM_DBS) as usize
}

/// What the image validator found of tiered values: every cold entry's stub (live and
/// flushed databases: each owns its record until it is freed), and the live databases'
/// cold entries and bytes (INFO's `tiered_entries`).
#[derive(Default, Debug)]
pub struct ColdScan {
    pub stubs: Vec<ColdStub>,
    pub live_entries: u64,
    pub live_bytes: u64,
}

/// Why a value read back from the tier file with good checksums is refused: its bytes
/// are not a well-formed value of the entry's type.
pub const BAD_BLOB: &str = "the record is not a well-formed value of the key's type";

impl Keyspace {
    /// The entry's tier bits.
    #[inline]
    pub fn tier_bits(&self, e: Ref) -> u8 {
        entry_flags(&self.arena, e) & TIER_FLAGS
    }
    #[inline]
    pub fn is_cold(&self, e: Ref) -> bool {
        entry_flags(&self.arena, e) & FLAG_COLD != 0
    }
    /// Sets (or clears) tier bits other than [`FLAG_COLD`] (which only
    /// [`Keyspace::make_cold`] / [`Keyspace::make_warm`] change).
    pub fn set_tier_bits(&mut self, e: Ref, bits: u8, on: bool) {
        let bits = bits & !FLAG_COLD & TIER_FLAGS;
        let f = &mut self.arena.bytes_mut(e, OFF_FLAGS, 1)[0];
        if on {
            *f |= bits;
        } else {
            *f &= !bits;
        }
    }
    /// The value changed: it no longer equals any copy on disk, and it was used.
    #[inline]
    pub(super) fn tier_value_changed(&mut self, e: Ref) {
        if entry_flags(&self.arena, e) & (FLAG_COOLED | FLAG_TMARK) != 0 {
            self.arena.bytes_mut(e, OFF_FLAGS, 1)[0] &= !(FLAG_COOLED | FLAG_TMARK);
        }
    }
    /// Where a cold entry's value is.
    pub fn cold_stub(&self, e: Ref) -> Option<ColdStub> {
        if !self.is_cold(e) {
            return None;
        }
        let kl = entry_key_len(&self.arena, e);
        Some(ColdStub::decode(self.arena.bytes(
            e,
            ENTRY_HEADER_BYTES + kl,
            COLD_STUB_BYTES,
        )))
    }

    /// The compactor moved a cold entry's record: its stub becomes `stub` (same lengths,
    /// another place), written over the old one in place. Not a change of the value.
    pub fn move_cold_stub(&mut self, e: Ref, stub: ColdStub) {
        let Some(old) = self.cold_stub(e) else {
            return;
        };
        debug_assert_eq!(
            (old.record_bytes, old.value_bytes),
            (stub.record_bytes, stub.value_bytes)
        );
        let kl = entry_key_len(&self.arena, e);
        self.arena
            .bytes_mut(e, ENTRY_HEADER_BYTES + kl, COLD_STUB_BYTES)
            .copy_from_slice(&stub.encode());
    }

    /// Drops an entry's RAM copy: the value field becomes `stub` (the bytes are on disk
    /// there). Key, TTL, access time, kind and encoding byte stay, so TYPE and OBJECT
    /// ENCODING answer without reading. The value is a string or a collection in a
    /// single-block encoding (nothing outside the entry, so nothing else to free). Not
    /// a change of the value (no WATCH, no notification). Returns the new entry.
    pub fn make_cold(&mut self, db: usize, e: Ref, stub: ColdStub) -> Ref {
        debug_assert!(!self.is_cold(e) && self.kind(e) != Kind::Stream);
        let key = self.key(e).to_vec();
        let kind = self.kind(e);
        let (enc, lru, expire) = (self.enc(e), self.lru(e), self.expire_at(e));
        let n = self.write_new_entry(&key, kind, enc, &stub.encode(), expire, lru);
        self.arena.bytes_mut(n, OFF_FLAGS, 1)[0] |= FLAG_COLD;
        // The old block's value (inline, or its out-of-line block) goes now.
        if entry_flags(&self.arena, e) & FLAG_BIG != 0 {
            let b = self
                .arena
                .read_u32(e, ENTRY_HEADER_BYTES + entry_key_len(&self.arena, e));
            super::blocks::drop_block(&mut self.arena, &self.pins, b);
        }
        self.swap_entry_block(db, e, n);
        self.tier.cold_entries += 1;
        self.tier.cold_bytes += stub.value_bytes as u64;
        n
    }

    /// Brings a cold entry's value back into RAM (`value`, read from its stub's place).
    /// The disk copy is kept: the entry is cooled. Returns the new entry.
    pub fn make_warm(&mut self, db: usize, e: Ref, value: &[u8]) -> Ref {
        debug_assert!(self.is_cold(e));
        let stub = self.cold_stub(e).expect("cold");
        let key = self.key(e).to_vec();
        let kind = self.kind(e);
        let (enc, lru, expire) = (self.enc(e), self.lru(e), self.expire_at(e));
        let n = self.write_new_entry(&key, kind, enc, value, expire, lru);
        self.arena.bytes_mut(n, OFF_FLAGS, 1)[0] |= FLAG_COOLED;
        self.swap_entry_block(db, e, n);
        self.tier.cold_entries = self.tier.cold_entries.saturating_sub(1);
        self.tier.cold_bytes = self.tier.cold_bytes.saturating_sub(stub.value_bytes as u64);
        n
    }

    /// The lookup fallback: `e` is cold and the running command needs its value, which
    /// the executor did not bring back first. Reads it now; None when the read failed
    /// (counted and logged; the value stays cold on disk).
    pub(super) fn warm_now(&mut self, db: usize, e: Ref) -> Option<Ref> {
        let stub = self.cold_stub(e)?;
        let key = self.key(e).to_vec();
        let mut reader = self.tier.reader.take()?;
        let (kind, valid) = (self.kind(e), self.values.single_block_is_valid);
        let got = reader.read_now(&key, stub).and_then(|v| {
            if valid(kind, &v) {
                Ok(v)
            } else {
                Err(BAD_BLOB.to_string())
            }
        });
        self.tier.reader = Some(reader);
        self.tier.sync_reads += 1;
        match got {
            Ok(v) => {
                let value_hash = self.arena.hash(&v);
                let n = self.make_warm(db, e, &v);
                self.tier.rewarmed.push(Rewarmed {
                    db,
                    key,
                    stub,
                    value_hash,
                });
                Some(n)
            }
            Err(msg) => {
                self.tier.sync_read_errors += 1;
                crate::warning!(
                    "Tiered read of key '{}' failed: {msg}",
                    String::from_utf8_lossy(&key)
                );
                None
            }
        }
    }

    /// A cold entry's value, read synchronously and checked as the fallback's is, the
    /// entry left cold (DEBUG DIGEST reads every cold value without bringing them back
    /// into RAM). Err: why not (a failed read is counted as the fallback's are).
    pub fn read_cold_value(&mut self, e: Ref) -> Result<Vec<u8>, String> {
        let stub = self
            .cold_stub(e)
            .ok_or_else(|| "the value is not cold".to_string())?;
        let key = self.key(e).to_vec();
        let mut reader = self
            .tier
            .reader
            .take()
            .ok_or_else(|| "tiering is off".to_string())?;
        let (kind, valid) = (self.kind(e), self.values.single_block_is_valid);
        let got = reader.read_now(&key, stub).and_then(|v| {
            if valid(kind, &v) {
                Ok(v)
            } else {
                Err(BAD_BLOB.to_string())
            }
        });
        self.tier.reader = Some(reader);
        self.tier.sync_reads += 1;
        if got.is_err() {
            self.tier.sync_read_errors += 1;
        }
        got
    }

    /// A keyspace restored from an image without tiering: every cold value of the live
    /// databases is replaced by its bytes, from `read` (the snapshot's companion file),
    /// each checked as a tier read is (`read` checks the pages and the key, here the
    /// value's form). The first failure stops it, naming the key. Cold entries of flushed
    /// databases stay as they are (they are only ever freed). Proportional to the cold
    /// values: for the loader thread, before anything is served.
    pub fn warm_all(&mut self, read: &mut ReadValue<'_>) -> Result<u64, String> {
        let mut warmed = 0u64;
        for db in 0..self.num_dbs {
            let mut keys = Vec::new();
            let mut cursor = 0;
            loop {
                cursor = self.scan(db, cursor, |e| {
                    if entry_flags(&self.arena, e) & FLAG_COLD != 0 || self.cold_part_count(e) > 0 {
                        keys.push(self.key(e).to_vec());
                    }
                });
                if cursor == 0 {
                    break;
                }
            }
            for key in keys {
                let Some(e) = self.find_raw(db, &key) else {
                    continue;
                };
                let name = String::from_utf8_lossy(&key);
                let Some(stub) = self.cold_stub(e) else {
                    let n = self
                        .warm_parts(e, read, false)
                        .map_err(|m| format!("tiered value of key '{name}': {m}"))?;
                    warmed += n as u64;
                    continue;
                };
                let v =
                    read(&key, stub).map_err(|m| format!("tiered value of key '{name}': {m}"))?;
                if !(self.values.single_block_is_valid)(self.kind(e), &v) {
                    return Err(format!("tiered value of key '{name}': {BAD_BLOB}"));
                }
                let n = self.make_warm(db, e, &v);
                self.arena.bytes_mut(n, OFF_FLAGS, 1)[0] &= !TIER_FLAGS;
                warmed += 1;
            }
        }
        Ok(warmed)
    }

    /// Cold parts of entry `e`'s value (quicklist nodes whose bytes are only on disk).
    pub fn cold_part_count(&self, e: Ref) -> u32 {
        if self.is_cold(e) {
            return 0;
        }
        (self.values.cold_part_count)(self.kind(e), self.value(e))
    }

    /// The cold parts of entry `e`'s value, with their records' places.
    pub fn cold_parts(&self, e: Ref) -> Vec<(Ref, ColdStub)> {
        if self.is_cold(e) {
            return vec![];
        }
        (self.values.cold_parts)(&self.arena, self.kind(e), self.value(e))
    }

    /// The value's header (a multi-block value's is inline in its entry), for the parts'
    /// primitives; written back with [`Keyspace::put_parts_header`]. Neither is a change of
    /// the value: its elements stay the same.
    fn parts_header(&self, e: Ref) -> Vec<u8> {
        self.value(e).to_vec()
    }
    fn put_parts_header(&mut self, e: Ref, hdr: &[u8]) {
        let kl = entry_key_len(&self.arena, e);
        self.arena
            .bytes_mut(e, ENTRY_HEADER_BYTES + kl, hdr.len())
            .copy_from_slice(hdr);
    }

    /// Part `part` of entry `e`'s value (a quicklist node) was written to the tier file at
    /// `stub`: its RAM copy is dropped. None (nothing changed): that part may not be cold
    /// (an end node, or bytes of another length). Not a change of the value.
    pub fn cool_part(&mut self, e: Ref, part: Ref, stub: ColdStub) -> Option<Ref> {
        if self.is_cold(e) || entry_flags(&self.arena, e) & FLAG_BIG != 0 {
            return None;
        }
        let mut hdr = self.parts_header(e);
        let kind = self.kind(e);
        let c = (self.values.cool_part)(&mut self.arena, kind, &mut hdr, part, stub)?;
        self.put_parts_header(e, &hdr);
        self.tier.cold_parts += 1;
        self.tier.cold_part_bytes += stub.value_bytes as u64;
        Some(c)
    }

    /// Brings every cold part of entry `e`'s value back into RAM, each read with `read`
    /// (which checks pages and key) and checked by the collection before it goes in. A
    /// part read back gives its place in the tier file up (`TierMeta::freed`) when
    /// `free_places` (a running tier; not a restore from a companion). The first failure stops it (the parts read so far stay in RAM, the
    /// rest cold) and says why. Returns the parts brought back.
    pub fn warm_parts(
        &mut self,
        e: Ref,
        read: &mut ReadValue<'_>,
        free_places: bool,
    ) -> Result<u32, String> {
        let key = self.key(e).to_vec();
        let kind = self.kind(e);
        let mut warmed = 0;
        for (part, stub) in self.cold_parts(e) {
            let v = read(&key, stub)?;
            let mut hdr = self.parts_header(e);
            (self.values.warm_part)(&mut self.arena, kind, &mut hdr, part, &v)?;
            self.put_parts_header(e, &hdr);
            self.tier.cold_parts = self.tier.cold_parts.saturating_sub(1);
            self.tier.cold_part_bytes = self
                .tier
                .cold_part_bytes
                .saturating_sub(stub.value_bytes as u64);
            if free_places {
                self.tier.freed.push(stub);
            }
            warmed += 1;
        }
        Ok(warmed)
    }

    /// The lookup fallback for a value with cold parts (see `warm_now`): reads them all
    /// now. None when a read failed (counted and logged; the parts not read stay cold).
    pub(super) fn warm_parts_now(&mut self, _db: usize, e: Ref) -> Option<Ref> {
        let mut reader = self.tier.reader.take()?;
        let mut reads = 0;
        let mut read = |key: &[u8], stub| {
            reads += 1;
            reader.read_now(key, stub)
        };
        let got = self.warm_parts(e, &mut read, true);
        self.tier.reader = Some(reader);
        self.tier.sync_reads += reads;
        match got {
            Ok(_) => Some(e),
            Err(msg) => {
                self.tier.sync_read_errors += 1;
                crate::warning!(
                    "Tiered read of key '{}' failed: {msg}",
                    String::from_utf8_lossy(self.key(e))
                );
                None
            }
        }
    }

    /// Takes the arena back (the loader warms a restored keyspace, then hands its arena
    /// on as any image's).
    pub fn into_arena(self) -> crate::arena::Arena {
        self.arena
    }

    /// The hash that identifies a value's bytes for the cooled queue (64-bit keyed
    /// SipHash: a changed value that hashes the same is a 2^-64 event).
    pub fn value_hash(&self, e: Ref) -> u64 {
        self.arena.hash(self.value(e))
    }

    /// The length of entry `e`'s value field (a stub's for a cold entry).
    pub fn value_field_len(&self, e: Ref) -> usize {
        entry_val_len(&self.arena, e)
    }

    /// Whether `e` has a TTL flag (for tests of the stub layout).
    pub fn has_expire_flag(&self, e: Ref) -> bool {
        entry_flags(&self.arena, e) & FLAG_EXPIRE != 0
    }
}
