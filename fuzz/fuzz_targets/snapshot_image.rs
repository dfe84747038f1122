//! Snapshot images from untrusted bytes. The target first rewrites every CRC the format
//! carries and the trailer's record count (`format::reseal`), so mutations reach the
//! record checks and the arena validation instead of dying at a checksum. An image that loads must then be usable:
//! the keyspace is rebuilt over it and every key is read and deleted, and the lazy free
//! run to the end — none of which may panic or touch memory outside the arena.
#![no_main]

use cairn::keyspace::Keyspace;
use cairn::persistence::snapshot::format::reseal;
use cairn::persistence::snapshot::load_image_bytes;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut img = data.to_vec();
    reseal(&mut img);
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
