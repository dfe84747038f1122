//! Snapshot images from untrusted bytes. The target first rewrites every CRC the format
//! carries and the trailer's record count (`format::reseal`), so mutations reach the
//! record checks and the arena validation instead of dying at a checksum. An image that
//! loads must then be usable: the keyspace is rebuilt over it, every value is read whole
//! (lists and sorted sets also from the tail), every key is deleted and the lazy free is
//! run to the end — none of which may panic or touch memory outside the arena — and the
//! emptied arena must validate again. The same bytes in the streamed order a full sync
//! sends (everything after the header, then the header) must load to the same outcome:
//! both refused, or the same header and the same arena bytes.
#![no_main]

use cairn::arena::Ref;
use cairn::collections::{list, zset};
use cairn::keyspace::{Keyspace, Kind};
use cairn::persistence::rdb_file::write_object;
use cairn::persistence::snapshot::format::{load_from_bytes, load_streamed, reseal, HEADER_BYTES};
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

/// Loads `img` as a file and in its streamed order; the outcomes must agree.
fn streamed_form_agrees(img: &[u8]) {
    if img.len() < HEADER_BYTES {
        return;
    }
    let mut streamed = img[HEADER_BYTES..].to_vec();
    streamed.extend_from_slice(&img[..HEADER_BYTES]);
    match (
        load_from_bytes(img, 64 << 20),
        load_streamed(&streamed[..], 64 << 20),
    ) {
        (Ok((mut file, fh)), Ok((mut stream, sh))) => {
            assert_eq!(fh, sh, "the streamed form's header differs from the file's");
            let n = fh.arena_bytes as usize;
            assert!(
                file.slice_mut(0, n) == stream.slice_mut(0, n),
                "the streamed form's arena differs from the file's"
            );
        }
        (Ok(_), Err(e)) => panic!("the file loads and its streamed form does not: {e}"),
        (Err(e), Ok(_)) => panic!("the streamed form loads and the file does not: {e}"),
        (Err(_), Err(_)) => {}
    }
}

fuzz_target!(|data: &[u8]| {
    let mut img = data.to_vec();
    reseal(&mut img);
    streamed_form_agrees(&img);
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
