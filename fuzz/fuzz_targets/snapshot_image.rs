//! Snapshot images from untrusted bytes. The target first rewrites every CRC the format
//! carries (header, record headers, payloads, the trailer's chain and its own) and the
//! trailer's record count, so mutations reach the record checks and the arena
//! validation instead of dying at a checksum. An image that loads must then be usable:
//! the keyspace is rebuilt over it and every key is read and deleted, and the lazy free
//! run to the end — none of which may panic or touch memory outside the arena.
#![no_main]

use cairn::keyspace::Keyspace;
use cairn::persistence::snapshot::format::{
    EXTENT_BYTES, HEADER_BYTES, RECORD_HEADER_BYTES, RECORD_MAGIC, TRAILER_BYTES, TRAILER_MAGIC,
};
use cairn::persistence::snapshot::load_image_bytes;
use libfuzzer_sys::fuzz_target;

fn put32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}
fn get32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

/// Recomputes the image's checksums where its structure can be followed.
fn fix_checksums(img: &mut [u8]) {
    if img.len() < HEADER_BYTES {
        return;
    }
    let crc = crc32c::crc32c(&img[..HEADER_BYTES - 4]);
    put32(img, HEADER_BYTES - 4, crc);
    let (mut pos, mut records, mut chain) = (HEADER_BYTES, 0u64, 0u32);
    while pos + 4 <= img.len() {
        if img[pos..pos + 4] == TRAILER_MAGIC && pos + TRAILER_BYTES <= img.len() {
            img[pos + 8..pos + 16].copy_from_slice(&records.to_le_bytes());
            put32(img, pos + 24, chain);
            let crc = crc32c::crc32c(&img[pos..pos + 28]);
            put32(img, pos + 28, crc);
            return;
        }
        if img[pos..pos + 4] != RECORD_MAGIC || pos + RECORD_HEADER_BYTES > img.len() {
            return;
        }
        let n = get32(img, pos + 8) as usize;
        let stored = get32(img, pos + 16) as usize;
        let body = n.saturating_mul(EXTENT_BYTES).saturating_add(stored);
        let start = pos + RECORD_HEADER_BYTES;
        if body > img.len() - start {
            return;
        }
        let crc = crc32c::crc32c(&img[start..start + body]);
        put32(img, pos + 20, crc);
        let hcrc = crc32c::crc32c(&img[pos..pos + 28]);
        put32(img, pos + 28, hcrc);
        chain = crc32c::crc32c_append(chain, &img[pos..pos + RECORD_HEADER_BYTES]);
        records += 1;
        pos = start + body;
    }
}

fuzz_target!(|data: &[u8]| {
    let mut img = data.to_vec();
    fix_checksums(&mut img);
    let Ok((arena, _)) = load_image_bytes(&img, 64 << 20) else {
        return;
    };
    let Ok(mut ks) = Keyspace::from_arena(arena, 16) else {
        return;
    };
    for db in 0..ks.num_dbs() {
        let mut entries = Vec::new();
        let mut cursor = 0;
        loop {
            cursor = ks.scan(db, cursor, |e| entries.push(e));
            if cursor == 0 {
                break;
            }
        }
        for e in entries {
            let key = ks.key(e).to_vec();
            let _ = (ks.kind(e), ks.value(e).len(), ks.expire_at(e));
            ks.delete(db, &key, 0);
        }
    }
    while ks.lazyfree_step(1 << 16) {}
    if let Err(e) = cairn::keyspace::validate::validate_image(&mut ks.arena) {
        panic!("emptying a validated image left an inconsistent arena: {e}");
    }
});
