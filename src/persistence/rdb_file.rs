//! Loading a `dump.rdb` written by Redis 7.0 / Valkey 8 (RDB versions up to 11), so a user
//! who swaps redis-server for cairn-server keeps their data. Values go through the shared
//! codec in `rdb_value.rs`; types the keyspace does not have yet stop startup with a clear
//! message (never a silent partial load).
//!
//! File layout (Redis's rdb.c): `REDIS` + 4-digit version, then opcodes — AUX, SELECTDB,
//! RESIZEDB, EXPIRETIME(_MS), IDLE, FREQ, or a value type byte followed by key and value —
//! then EOF (0xFF) and, from version 5, a CRC-64 of everything before it (0 = disabled).

use super::rdb_value::{crc64, read_value, write_len, write_string, RdbError, Reader, Value};
use crate::arena::Ref;
use crate::config::Config;
use crate::keyspace::{Keyspace, Kind, StrEnc, Ttl};

/// Appends entry `e`'s value in RDB form, type byte first (Redis's `rdbSaveObjectType` +
/// `rdbSaveObject`). Err(kind) for a kind the codec cannot encode yet.
pub fn write_object(ks: &Keyspace, e: Ref, out: &mut Vec<u8>) -> Result<(), Kind> {
    match ks.kind(e) {
        Kind::String => super::rdb_value::write_string_object(out, ks.value(e)),
        Kind::List => {
            let segs = crate::collections::list::segments(ks, e);
            let lps: Vec<&[u8]> = segs
                .iter()
                .map(|&s| crate::collections::list::seg_lp(ks, e, s))
                .collect();
            super::rdb_value::write_list_object(out, &lps);
        }
        Kind::Hash => write_hash(ks, e, out),
        Kind::ZSet => write_zset(ks, e, out),
        Kind::Set => write_set(ks, e, out),
        Kind::Stream => {
            use crate::collections::stream;
            let v = ks.value(e);
            let m = stream::Meta::read(v);
            let groups: Vec<_> = crate::collections::stream_groups::groups(&ks.arena, m.groups)
                .into_iter()
                .map(|g| crate::collections::stream_groups::export(&ks.arena, g))
                .collect();
            super::rdb_value::write_stream_object(out, &stream::nodes(&ks.arena, v), &m, &groups);
        }
    }
    Ok(())
}

/// A hash as DUMP writes it: listpack hashes as RDB_TYPE_HASH_LISTPACK, hashtables as
/// RDB_TYPE_HASH.
fn write_hash(ks: &Keyspace, e: Ref, out: &mut Vec<u8>) {
    use crate::collections::hash;
    if let Some(lp) = hash::listpack(ks, e) {
        super::rdb_value::write_hash_listpack_object(out, lp);
        return;
    }
    let mut pairs: Vec<(Vec<u8>, Vec<u8>)> = vec![];
    hash::for_each(ks, e, |f, v| pairs.push((f.to_vec(), v.to_vec())));
    let refs: Vec<(&[u8], &[u8])> = pairs.iter().map(|(f, v)| (&f[..], &v[..])).collect();
    super::rdb_value::write_hash_object(out, &refs);
}

/// A sorted set as DUMP writes it: listpack zsets as RDB_TYPE_ZSET_LISTPACK (the bytes as
/// they are), skiplists as RDB_TYPE_ZSET_2 from the greatest element down, as Redis does.
fn write_zset(ks: &Keyspace, e: Ref, out: &mut Vec<u8>) {
    use crate::collections::zset;
    if let Some(lp) = zset::listpack(ks, e) {
        super::rdb_value::write_zset_listpack_object(out, lp);
        return;
    }
    let mut items: Vec<(&[u8], f64)> = Vec::with_capacity(zset::skiplist_len(ks, e) as usize);
    zset::for_each_descending(ks, e, |m, s| items.push((m, s)));
    super::rdb_value::write_zset2_object(out, &items);
}

/// A set as DUMP writes it: an intset as RDB_TYPE_SET_INTSET, anything else as
/// RDB_TYPE_SET. A listpack set is not written as type 20 (Redis 7.2's): RDB version 10,
/// which the payloads declare, has no such type, and Redis 7.0 refuses it.
fn write_set(ks: &Keyspace, e: Ref, out: &mut Vec<u8>) {
    use super::rdb_value as rv;
    use crate::collections::set::{self, Encoded};
    match set::encoded(ks, e) {
        Encoded::Intset(bytes) => rv::write_set_intset_object(out, bytes),
        _ => {
            let ms = set::members(ks, e);
            let refs: Vec<&[u8]> = ms.iter().map(|m| m.as_slice()).collect();
            rv::write_set_object(out, &refs);
        }
    }
}

/// `write_object` for an RDB file Redis 7.0 must load (`--export-rdb`): what DUMP writes
/// (only RDB version 10's types).
pub fn write_export_object(ks: &Keyspace, e: Ref, out: &mut Vec<u8>) -> Result<(), Kind> {
    write_object(ks, e, out)
}

use super::rdb_value::{OP_FUNCTION2, OP_FUNCTION_PRE_GA};
const OP_MODULE_AUX: u8 = 247;
const OP_IDLE: u8 = 248;
const OP_FREQ: u8 = 249;
const OP_AUX: u8 = 250;
const OP_RESIZEDB: u8 = 251;
const OP_EXPIRETIME_MS: u8 = 252;
const OP_EXPIRETIME: u8 = 253;
const OP_SELECTDB: u8 = 254;
const OP_EOF: u8 = 255;

/// Newest RDB version understood (Redis 7.2 writes 11; 7.0 writes 10).
pub const RDB_VERSION_MAX: u32 = 11;

/// True if `head` starts like an RDB file.
pub fn looks_like_rdb(head: &[u8]) -> bool {
    head.len() >= 9 && &head[..5] == b"REDIS" && head[5..9].iter().all(|c| c.is_ascii_digit())
}

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RdbLoadStats {
    pub version: u32,
    pub keys_loaded: u64,
    pub keys_expired_skipped: u64,
    pub aux_fields: u64,
    /// The log position an AOF base stands for, from cairn's AUX fields (`cairn-aof-lsn`)
    /// and Redis's (`repl-id`, `repl-offset`), when the file has them.
    pub aof_lsn: Option<u64>,
    pub repl_id: Option<String>,
    pub repl_offset: Option<u64>,
    /// Redis's `repl-stream-db`: the db the replication stream after the file's
    /// `repl-offset` runs in (a replica's sub-replica starts its primary's client there).
    pub repl_stream_db: Option<u64>,
    /// The function libraries' codes, in file order (the server loads them).
    pub functions: Vec<Vec<u8>>,
}

/// AUX field naming the AOF LSN an RDB base of the log stands for (cairn's own; Redis
/// skips AUX fields it does not know).
pub const AUX_AOF_LSN: &str = "cairn-aof-lsn";

/// Why a file could not be loaded: the message names the byte offset.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("RDB load failed at byte {offset}: {what}")]
pub struct RdbLoadError {
    pub offset: usize,
    pub what: String,
}

fn fail(r: &Reader, what: impl Into<String>) -> RdbLoadError {
    RdbLoadError {
        offset: r.pos(),
        what: what.into(),
    }
}

fn rdb(r: &Reader, e: RdbError) -> RdbLoadError {
    fail(r, e.to_string())
}

/// The AOF LSN an RDB base stands for (its `cairn-aof-lsn` AUX field), read from the AUX
/// fields at the start of the file without loading it (`--check-aof`).
pub fn base_aof_lsn(data: &[u8]) -> Option<u64> {
    let mut r = Reader::new(data);
    if !looks_like_rdb(r.read_bytes(9).ok()?) {
        return None;
    }
    while r.read_u8().ok()? == OP_AUX {
        let k = r.read_string().ok()?.into_owned();
        let v = r.read_string().ok()?;
        if k == AUX_AOF_LSN.as_bytes() {
            return std::str::from_utf8(&v).ok()?.parse().ok();
        }
    }
    None
}

/// Loads every key of `data` (a whole RDB file) into `ks`. Keys whose expire time is
/// before `now_ms` are skipped, as a Redis master does on load (an AOF base passes
/// `i64::MIN`: the log replayed after it may still name them, as Redis's preamble load).
/// Room kept free beyond a loaded key's own estimate (dict growth, database headers).
const ARENA_LOAD_SLACK_BYTES: u64 = 64 << 20;

pub fn load_rdb(
    data: &[u8],
    ks: &mut Keyspace,
    config: &Config,
    now_ms: i64,
) -> Result<RdbLoadStats, RdbLoadError> {
    let hash_limits = crate::collections::hash::Limits::from_config(config);
    let zset_limits = crate::collections::zset::Limits::from_config(config);
    let set_limits = crate::collections::set::Limits::from_config(config);
    let mut r = Reader::new(data);
    let head = r.read_bytes(9).map_err(|e| rdb(&r, e))?;
    if !looks_like_rdb(head) {
        return Err(fail(&r, "not an RDB file (no REDIS signature)"));
    }
    let version: u32 = std::str::from_utf8(&head[5..9])
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    if version == 0 || version > RDB_VERSION_MAX {
        return Err(fail(
            &r,
            format!("can't handle RDB format version {version}"),
        ));
    }
    let mut stats = RdbLoadStats {
        version,
        ..Default::default()
    };
    let mut db = 0usize;
    let mut expire: Option<i64> = None;
    loop {
        let op = r.read_u8().map_err(|e| rdb(&r, e))?;
        match op {
            OP_EOF => {
                let body_end = r.pos();
                if version >= 5 {
                    let sum = r.read_bytes(8).map_err(|e| rdb(&r, e))?;
                    let want = u64::from_le_bytes(sum.try_into().expect("8 bytes"));
                    if want != 0 && crc64(&data[..body_end]) != want {
                        return Err(fail(&r, "wrong RDB checksum"));
                    }
                }
                return Ok(stats);
            }
            OP_AUX => {
                let k = r.read_string().map_err(|e| rdb(&r, e))?.into_owned();
                let v = r.read_string().map_err(|e| rdb(&r, e))?;
                let text = || String::from_utf8_lossy(&v).into_owned();
                match k.as_slice() {
                    b"cairn-aof-lsn" => stats.aof_lsn = text().parse().ok(),
                    b"repl-id" => stats.repl_id = Some(text()),
                    b"repl-offset" => stats.repl_offset = text().parse().ok(),
                    b"repl-stream-db" => stats.repl_stream_db = text().parse().ok(),
                    _ => {}
                }
                stats.aux_fields += 1;
            }
            OP_RESIZEDB => {
                r.read_plain_len().map_err(|e| rdb(&r, e))?;
                r.read_plain_len().map_err(|e| rdb(&r, e))?;
            }
            OP_SELECTDB => {
                let n = r.read_plain_len().map_err(|e| rdb(&r, e))?;
                if n as usize >= ks.num_dbs() {
                    return Err(fail(
                        &r,
                        format!(
                            "the file selects DB {n} but 'databases' is {}",
                            ks.num_dbs()
                        ),
                    ));
                }
                db = n as usize;
            }
            OP_EXPIRETIME_MS => {
                let b = r.read_bytes(8).map_err(|e| rdb(&r, e))?;
                expire = Some(i64::from_le_bytes(b.try_into().expect("8 bytes")));
            }
            OP_EXPIRETIME => {
                let b = r.read_bytes(4).map_err(|e| rdb(&r, e))?;
                expire = Some(i32::from_le_bytes(b.try_into().expect("4 bytes")) as i64 * 1000);
            }
            OP_IDLE => {
                r.read_plain_len().map_err(|e| rdb(&r, e))?;
            }
            OP_FREQ => {
                r.read_u8().map_err(|e| rdb(&r, e))?;
            }
            OP_FUNCTION2 | OP_FUNCTION_PRE_GA => {
                let code =
                    super::rdb_value::read_function_library(op, &mut r).map_err(|e| fail(&r, e))?;
                stats.functions.push(code);
            }
            OP_MODULE_AUX => {
                return Err(fail(
                    &r,
                    "the file holds module data, which cairn does not support",
                ));
            }
            t => {
                let key = r.read_string().map_err(|e| rdb(&r, e))?.into_owned();
                let value = read_value(t, &mut r).map_err(|e| match e {
                    RdbError::UnsupportedType(t) => fail(
                        &r,
                        format!(
                            "key '{}' has RDB value type {t}, which cairn cannot store yet",
                            String::from_utf8_lossy(&key)
                        ),
                    ),
                    e => rdb(&r, e),
                })?;
                let ttl = expire.take();
                if ttl.is_some_and(|t| t < now_ms) {
                    stats.keys_expired_skipped += 1;
                    continue;
                }
                let ttl = ttl.map_or(Ttl::Clear, Ttl::At);
                // A dataset larger than the arena's address space stops the load with an
                // error instead of exhausting it mid-key.
                let slack = ARENA_LOAD_SLACK_BYTES.min(ks.arena.reserved_bytes() as u64 / 16);
                let need = value.arena_bytes_estimate() + key.len() as u64 + slack;
                if ks.arena.headroom_bytes() < need {
                    return Err(fail(
                        &r,
                        format!(
                            "the dataset does not fit the arena's address space ({} bytes reserved; raise arena-reserve-bytes)",
                            ks.arena.reserved_bytes()
                        ),
                    ));
                }
                match value {
                    Value::String(v) => {
                        ks.set_string(db, &key, &v, StrEnc::for_value(&v), ttl);
                    }
                    Value::List(lps) => {
                        crate::collections::list::create_from(ks, db, &key, &lps, ttl);
                    }
                    Value::Hash(pairs) => {
                        crate::collections::hash::create_from(
                            ks,
                            db,
                            &key,
                            &pairs,
                            ttl,
                            hash_limits,
                        );
                    }
                    Value::ZSet(pairs) => {
                        crate::collections::zset::create_from(
                            ks,
                            db,
                            &key,
                            pairs,
                            ttl,
                            zset_limits,
                        );
                    }
                    Value::Set(members) => {
                        crate::collections::set::create_from(
                            ks, db, &key, &members, ttl, set_limits,
                        );
                    }
                    Value::SetIntset(is) => {
                        crate::collections::set::create_from_intset(
                            ks, db, &key, &is, ttl, set_limits,
                        );
                    }
                    Value::Stream(s) => {
                        crate::collections::stream::create_from(ks, db, &key, &s, ttl);
                    }
                }
                stats.keys_loaded += 1;
            }
        }
    }
}

/// Writes the whole keyspace as a Redis 7.0 RDB (version 10) that redis-server loads, to
/// `sink` in pieces of about [`RDB_WRITE_CHUNK_BYTES`] (memory stays bounded whatever the
/// dataset), with `aux` as extra AUX fields after cairn's. Never on the executor: it walks
/// every key (`--export-rdb`, and BGREWRITEAOF's RDB base, on a copy of the keyspace
/// loaded from a snapshot image). `key_delay_us` > 0 sleeps that long after each key
/// (Redis's `rdb-key-save-delay`, for tests that need a slow save). Returns the number of
/// keys written.
pub fn write_rdb<W: std::io::Write>(
    ks: &mut Keyspace,
    sink: &mut W,
    aux: &[(&str, String)],
    key_delay_us: u64,
) -> Result<u64, String> {
    write_rdb_with_functions(ks, sink, aux, &[], key_delay_us)
}

/// [`write_rdb`] with the function libraries `functions` (RDB function records, as an
/// image carries them) after the AUX fields, where Redis writes them.
pub fn write_rdb_with_functions<W: std::io::Write>(
    ks: &mut Keyspace,
    sink: &mut W,
    aux: &[(&str, String)],
    functions: &[u8],
    key_delay_us: u64,
) -> Result<u64, String> {
    let mut digest = super::rdb_value::crc64_digest();
    let mut out: Vec<u8> = Vec::with_capacity(RDB_WRITE_CHUNK_BYTES * 2);
    let mut emit = |out: &mut Vec<u8>, last: bool| -> Result<(), String> {
        if out.len() < RDB_WRITE_CHUNK_BYTES && !last {
            return Ok(());
        }
        digest.update(out);
        if last {
            let sum = std::mem::replace(&mut digest, super::rdb_value::crc64_digest());
            out.extend_from_slice(&sum.finalize().to_le_bytes());
        }
        sink.write_all(out)
            .map_err(|e| format!("writing the RDB file: {e}"))?;
        out.clear();
        Ok(())
    };
    // Finish any incremental rehash so each entry is visited exactly once.
    while ks.rehash_step_all(1 << 16) {}
    out.extend_from_slice(format!("REDIS{:04}", super::rdb_value::RDB_VERSION).as_bytes());
    let fixed = [
        ("redis-ver", "7.0.15"),
        ("redis-bits", "64"),
        ("cairn-ver", env!("CARGO_PKG_VERSION")),
    ];
    let extra = aux.iter().map(|(k, v)| (*k, v.as_str()));
    for (k, v) in fixed.into_iter().chain(extra) {
        out.push(OP_AUX);
        write_string(&mut out, k.as_bytes());
        write_string(&mut out, v.as_bytes());
    }
    out.extend_from_slice(functions);
    let mut keys = 0u64;
    let mut obj = Vec::new();
    for db in 0..ks.num_dbs() {
        if ks.dbsize(db) == 0 {
            continue;
        }
        out.push(OP_SELECTDB);
        write_len(&mut out, db as u64);
        out.push(OP_RESIZEDB);
        write_len(&mut out, ks.dbsize(db));
        write_len(&mut out, ks.volatile_count(db));
        let mut entries = Vec::new();
        let mut cursor = 0;
        loop {
            cursor = ks.scan(db, cursor, |e| entries.push(e));
            for e in entries.drain(..) {
                if let Some(t) = ks.expire_at(e) {
                    out.push(OP_EXPIRETIME_MS);
                    out.extend_from_slice(&t.to_le_bytes());
                }
                // Type byte, key, value: the type byte comes from `write_object`.
                obj.clear();
                write_export_object(ks, e, &mut obj).map_err(|kind| {
                    format!(
                        "key '{}' is a {}, which the RDB writer does not handle yet",
                        String::from_utf8_lossy(ks.key(e)),
                        kind.type_name()
                    )
                })?;
                out.push(obj[0]);
                write_string(&mut out, ks.key(e));
                out.extend_from_slice(&obj[1..]);
                keys += 1;
                emit(&mut out, false)?;
                if key_delay_us > 0 {
                    std::thread::sleep(std::time::Duration::from_micros(key_delay_us));
                }
            }
            if cursor == 0 {
                break;
            }
        }
    }
    out.push(OP_EOF);
    emit(&mut out, true)?;
    Ok(keys)
}

/// How much of an RDB file [`write_rdb`] buffers before handing it to its sink.
pub const RDB_WRITE_CHUNK_BYTES: usize = 1 << 20;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arena::Arena;
    use crate::persistence::rdb_value::{write_len, write_string};

    fn file(body: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
        let mut f = b"REDIS0010".to_vec();
        f.push(OP_AUX);
        write_string(&mut f, b"redis-ver");
        write_string(&mut f, b"7.0.15");
        body(&mut f);
        f.push(OP_EOF);
        let sum = crc64(&f);
        f.extend_from_slice(&sum.to_le_bytes());
        f
    }

    fn ks() -> Keyspace {
        crate::collections::new_keyspace(Arena::new(1 << 30, [1, 2]).unwrap(), 16)
    }

    #[test]
    fn strings_expiry_and_dbs_load() {
        let data = file(|f| {
            f.push(OP_SELECTDB);
            write_len(f, 0);
            f.push(OP_RESIZEDB);
            write_len(f, 2);
            write_len(f, 1);
            f.push(0);
            write_string(f, b"a");
            write_string(f, b"hello");
            f.push(OP_EXPIRETIME_MS);
            f.extend_from_slice(&5_000i64.to_le_bytes());
            f.push(0);
            write_string(f, b"gone");
            write_string(f, b"x");
            f.push(OP_EXPIRETIME_MS);
            f.extend_from_slice(&50_000i64.to_le_bytes());
            f.push(0);
            write_string(f, b"ttl");
            write_string(f, b"12345");
            f.push(OP_SELECTDB);
            write_len(f, 3);
            f.push(0);
            write_string(f, b"b");
            write_string(f, b"in db 3");
        });
        let mut k = ks();
        let st = load_rdb(&data, &mut k, &Config::default(), 10_000).unwrap();
        assert_eq!(st.keys_loaded, 3);
        assert_eq!(st.keys_expired_skipped, 1);
        let e = k.find_raw(0, b"a").unwrap();
        assert_eq!(k.value(e), b"hello");
        let e = k.find_raw(0, b"ttl").unwrap();
        assert_eq!(k.expire_at(e), Some(50_000));
        assert!(k.find_raw(0, b"gone").is_none());
        assert!(k.find_raw(3, b"b").is_some());
    }

    #[test]
    fn written_rdb_loads_back() {
        let mut a = ks();
        for i in 0..5000 {
            let ttl = if i % 3 == 0 {
                Ttl::At(1 << 50)
            } else {
                Ttl::Clear
            };
            let v = format!("v{i}");
            a.set_string(
                i % 4,
                format!("k{i}").as_bytes(),
                v.as_bytes(),
                StrEnc::for_value(v.as_bytes()),
                ttl,
            );
        }
        let mut out = Vec::new();
        assert_eq!(write_rdb(&mut a, &mut out, &[], 0).unwrap(), 5000);
        let mut b = ks();
        let st = load_rdb(&out, &mut b, &Config::default(), 0).unwrap();
        assert_eq!(st.keys_loaded, 5000);
        for db in 0..4 {
            assert_eq!(a.dbsize(db), b.dbsize(db));
            assert_eq!(a.volatile_count(db), b.volatile_count(db));
        }
        let e = b.find_raw(1, b"k1").unwrap();
        assert_eq!(b.value(e), b"v1");
    }

    /// An AOF base's position rides in AUX fields; the streamed file (written in several
    /// chunks) has a valid CRC-64.
    #[test]
    fn aof_base_aux_fields_round_trip() {
        let mut a = ks();
        let big = vec![b'x'; 4096];
        for i in 0..600 {
            a.set_string(0, format!("k{i}").as_bytes(), &big, StrEnc::Raw, Ttl::Clear);
        }
        let aux = [
            (AUX_AOF_LSN, "12345".to_string()),
            ("repl-id", "a".repeat(40)),
            ("repl-offset", "999".to_string()),
        ];
        let mut out = Vec::new();
        assert_eq!(write_rdb(&mut a, &mut out, &aux, 0).unwrap(), 600);
        assert!(out.len() > 2 * RDB_WRITE_CHUNK_BYTES);
        assert_eq!(base_aof_lsn(&out), Some(12345));
        let mut b = ks();
        // i64::MIN: nothing counts as expired (an AOF base).
        let st = load_rdb(&out, &mut b, &Config::default(), i64::MIN).unwrap();
        assert_eq!(st.keys_loaded, 600);
        assert_eq!(st.aof_lsn, Some(12345));
        assert_eq!(st.repl_id.as_deref(), Some("a".repeat(40).as_str()));
        assert_eq!(st.repl_offset, Some(999));
        let mut plain = Vec::new();
        write_rdb(&mut a, &mut plain, &[], 0).unwrap();
        assert_eq!(base_aof_lsn(&plain), None);
    }

    #[test]
    fn corruption_is_reported_never_panics() {
        let good = file(|f| {
            f.push(0);
            write_string(f, b"k");
            write_string(f, b"v");
        });
        let mut flipped = good.clone();
        let i = flipped.len() - 12;
        flipped[i] ^= 0x01;
        let e = load_rdb(&flipped, &mut ks(), &Config::default(), 0).unwrap_err();
        assert!(
            e.what.contains("checksum") || e.what.contains("type"),
            "{e}"
        );
        for cut in 0..good.len() {
            assert!(load_rdb(&good[..cut], &mut ks(), &Config::default(), 0).is_err());
        }
        let mut rng = crate::util::Rng::new(5);
        for _ in 0..2000 {
            let mut d = good.clone();
            let n = 1 + rng.below(4) as usize;
            for _ in 0..n {
                let i = rng.below(d.len() as u64) as usize;
                d[i] = rng.next_u64() as u8;
            }
            let _ = load_rdb(&d, &mut ks(), &Config::default(), 0);
        }
        // A stream declaring a consumer group the file does not hold.
        let hash = file(|f| {
            f.push(19);
            write_string(f, b"h");
            for n in [0, 0, 0, 0, 0, 0, 0, 0, 0, 1] {
                write_len(f, n);
            }
        });
        assert!(load_rdb(&hash, &mut ks(), &Config::default(), 0).is_err());
    }
}
