//! Snapshot images from untrusted bytes. The target first rewrites every CRC the format
//! carries and the trailer's record count (`format::reseal`), so mutations reach the
//! record checks and the arena validation instead of dying at a checksum. An image that
//! loads must then be usable: the keyspace is rebuilt over it, every value is read whole
//! (lists and sorted sets also from the tail), every key is deleted and the lazy free is
//! run to the end — none of which may panic or touch memory outside the arena — and the
//! emptied arena must validate again.
#![no_main]

use cairn::arena::Ref;
use cairn::collections::{list, zset};
use cairn::keyspace::{Keyspace, Kind};
use cairn::persistence::rdb_file::write_object;
use cairn::persistence::snapshot::format::reseal;
use cairn::persistence::snapshot::load_image_bytes;
use libfuzzer_sys::fuzz_target;

/// Reads every element of a value the way replies do: DUMP's encoding reads it all in
/// order; lists and sorted sets are also walked from the tail (back links, backlens).
fn read_whole_value(ks: &Keyspace, e: Ref) {
    let mut out = Vec::new();
    let _ = write_object(ks, e, &mut out);
    match ks.kind(e) {
        Kind::List => {
            let n = list::len(ks, e);
            if n > 0 {
                list::walk(ks, e, n - 1, true, |_| true);
            }
        }
        Kind::ZSet => {
            let n = zset::len(ks, e);
            if n > 0 {
                zset::walk(ks, e, n - 1, true, |_, _| true);
            }
        }
        _ => {}
    }
}

fuzz_target!(|data: &[u8]| {
    let mut img = data.to_vec();
    reseal(&mut img);
    let Ok((arena, _)) = load_image_bytes(&img, 64 << 20) else {
        return;
    };
    let Ok(mut ks) = cairn::collections::keyspace_from_arena(arena, 16) else {
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
            let _ = (ks.value(e).len(), ks.expire_at(e));
            read_whole_value(&ks, e);
            ks.delete(db, &key, 0);
        }
    }
    while ks.lazyfree_step(1 << 16) {}
    if let Err(e) = cairn::collections::validate_image(&mut ks.arena) {
        panic!("emptying a validated image left an inconsistent arena: {e}");
    }
});
