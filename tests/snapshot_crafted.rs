//! Crafted snapshot images: a data file is input, not memory. Each test builds a real
//! keyspace holding every kind of structure (strings in line and out of line, TTLs,
//! inline and node-based lists, listpack and table hashes, intset/listpack/table sets,
//! listpack and skiplist zsets, a flushed database in the graveyard, a detached big value,
//! an orphaned block), damages one structure the way a hostile or broken file could, and
//! writes the image with the ordinary writer (so every CRC is right). Loading must then
//! stop with an error naming the structure, never panic or read out of bounds.

use cairn::arena::{size_class, Arena, Ref, ALIGN_BYTES, FREE_HEADS_OFFSET, NULL};
use cairn::collections::{hash, list, set, zset};
use cairn::config::Config;
use cairn::keyspace::{Keyspace, StrEnc, Ttl, ENTRY_HEADER_BYTES};
use cairn::persistence::snapshot::format::{
    reseal, CutMode, Extent, ImageHeader, ImageWriter, Record,
};
use cairn::persistence::snapshot::{load_image_bytes, save_blocking, SnapMode, SnapParams};

const ARENA_BYTES: usize = 64 << 20;

/// The entries of the keyspace `every_kind` builds that the tests damage.
struct Built {
    ks: Keyspace,
    string: Ref,
    hash_inline: Ref,
}

fn every_kind() -> Built {
    let config = Config::default();
    let mut ks = cairn::collections::new_keyspace(Arena::new(ARENA_BYTES, [11, 12]).unwrap(), 3);
    let string = ks.set_string(0, b"str", b"value", StrEnc::Embstr, Ttl::Clear);
    ks.set_string(0, b"ttl", b"v", StrEnc::Embstr, Ttl::At(i64::MAX / 4));
    ks.set_string(
        0,
        b"big",
        &[b'x'; 20_000],
        StrEnc::Raw,
        Ttl::At(i64::MAX / 4),
    );
    let items = |n: usize, w: usize| -> Vec<Vec<u8>> {
        (0..n).map(|i| format!("{i:0w$}").into_bytes()).collect()
    };
    list::create_from(&mut ks, 0, b"list-small", &[lp(&items(3, 4))], Ttl::Clear);
    let nodes: Vec<Vec<u8>> = items(3000, 40).chunks(150).map(lp).collect();
    list::create_from(&mut ks, 0, b"list-nodes", &nodes, Ttl::Clear);
    let hash_limits = hash::Limits::from_config(&config);
    let pairs = |n: usize| -> Vec<(Vec<u8>, Vec<u8>)> {
        items(n, 6).into_iter().map(|f| (f.clone(), f)).collect()
    };
    let hash_inline = hash::create_from(
        &mut ks,
        0,
        b"hash-small",
        &pairs(4),
        Ttl::Clear,
        hash_limits,
    );
    hash::create_from(
        &mut ks,
        1,
        b"hash-table",
        &pairs(1000),
        Ttl::Clear,
        hash_limits,
    );
    let set_limits = set::Limits::from_config(&config);
    let ints: Vec<Vec<u8>> = (0..10).map(|i| i.to_string().into_bytes()).collect();
    set::create_from(&mut ks, 0, b"set-ints", &ints, Ttl::Clear, set_limits);
    set::create_from(
        &mut ks,
        0,
        b"set-small",
        &items(5, 12),
        Ttl::Clear,
        set_limits,
    );
    set::create_from(
        &mut ks,
        1,
        b"set-table",
        &items(700, 12),
        Ttl::Clear,
        set_limits,
    );
    let zset_limits = zset::Limits::from_config(&config);
    let scored = |n: usize| -> zset::Pairs {
        items(n, 8)
            .into_iter()
            .enumerate()
            .map(|(i, m)| (m, (i % 17) as f64 * 1.5))
            .collect()
    };
    zset::create_from(
        &mut ks,
        0,
        b"zset-small",
        scored(5),
        Ttl::Clear,
        zset_limits,
    );
    zset::create_from(
        &mut ks,
        1,
        b"zset-sl",
        scored(2000),
        Ttl::Clear,
        zset_limits,
    );
    // A flushed database waiting in the graveyard, a big collection detached by DEL to the
    // value graveyard, and a block a reply still referenced (the orphan list).
    ks.set_string(2, b"gone", b"soon", StrEnc::Embstr, Ttl::Clear);
    ks.flush_db(2);
    hash::create_from(
        &mut ks,
        1,
        b"hash-deleted",
        &pairs(500),
        Ttl::Clear,
        hash_limits,
    );
    assert!(ks.delete(1, b"hash-deleted", 0));
    let pinned = ks.set_string(1, b"pinned", &[b'p'; 9000], StrEnc::Raw, Ttl::Clear);
    let (block, _) = ks.pin_value(pinned).unwrap();
    assert!(ks.delete(1, b"pinned", 0));
    assert!(ks.lazyfree_pending > 0 && block != NULL);
    Built {
        ks,
        string,
        hash_inline,
    }
}

fn lp(elems: &[Vec<u8>]) -> Vec<u8> {
    cairn::collections::listpack::build(elems.iter().map(|e| e.as_slice()))
}

/// The image SAVE would write of this arena.
fn image_of(ks: &Keyspace, tag: &str) -> Vec<u8> {
    let dir = std::env::temp_dir().join(format!("cairn-crafted-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("dump.cimg");
    let params = SnapParams {
        path: path.clone(),
        threads: 1,
        pause_budget_us: 1000,
        mode: SnapMode::StopTheWorld,
        repl_id: [b'0'; 40],
        repl_offset: 0,
        repl_stream_db: 0,
        databases: ks.num_dbs() as u32,
        on_cut: None,
        executor_cpu: None,
        wide_cpus: None,
        write_behind: false,
        functions: Default::default(),
        tier: None,
        follow: None,
        record_delay_us: 0,
        dirty_map: None,
        verify_dirty_map: false,
        capture: None,
        verify_cow: false,
    };
    save_blocking(&ks.arena, ks.total_keys(), &params).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    bytes
}

/// Loads an image the way startup does; the error text when it is refused.
fn load_error(image: &[u8]) -> String {
    match load_image_bytes(image, ARENA_BYTES) {
        Ok((arena, _)) => match cairn::collections::keyspace_from_arena(arena, 16) {
            Ok(_) => panic!("the damaged image loaded"),
            Err(e) => e,
        },
        Err(e) => e,
    }
}

fn byte_offset(r: Ref) -> u64 {
    r as u64 * ALIGN_BYTES as u64
}

#[test]
fn the_undamaged_image_loads_and_serves_every_kind() {
    let built = every_kind();
    let image = image_of(&built.ks, "intact");
    let (arena, _) = load_image_bytes(&image, ARENA_BYTES).unwrap();
    let mut ks = cairn::collections::keyspace_from_arena(arena, 16).unwrap();
    let e = ks.find_raw(0, b"big").unwrap();
    assert_eq!(ks.value(e), &[b'x'; 20_000][..]);
    let e = ks.find_raw(1, b"zset-sl").unwrap();
    assert_eq!(zset::len(&ks, e), 2000);
    let e = ks.find_raw(0, b"list-nodes").unwrap();
    assert_eq!(list::len(&ks, e), 3000);
    while ks.lazyfree_step(1000) {}
    for db in 0..3 {
        for key in [
            &b"hash-table"[..],
            b"set-table",
            b"zset-sl",
            b"list-nodes",
            b"big",
        ] {
            ks.delete(db, key, 0);
        }
    }
}

#[test]
fn a_value_length_past_the_entry_is_refused() {
    let mut built = every_kind();
    built.ks.arena.write_u32(built.string, 8, 0x7FFF_FFF0);
    let err = load_error(&image_of(&built.ks, "vlen"));
    assert!(
        err.contains("key entry") && err.contains("outside the allocated arena"),
        "{err}"
    );
    assert!(
        err.contains(&format!("arena offset {}", byte_offset(built.string))),
        "{err}"
    );
}

#[test]
fn an_unknown_kind_byte_is_refused() {
    let mut built = every_kind();
    built.ks.arena.bytes_mut(built.string, 16, 1)[0] = 9;
    let err = load_error(&image_of(&built.ks, "kind"));
    assert!(err.contains("entry kind byte 9"), "{err}");
}

#[test]
fn an_orphan_root_pointing_at_a_fake_block_is_refused() {
    let mut built = every_kind();
    // A "block" in the middle of a live entry.
    built.ks.arena.set_root(4, built.string as u64 + 1);
    let err = load_error(&image_of(&built.ks, "orphan"));
    assert!(err.contains("orphaned value block"), "{err}");
}

#[test]
fn a_free_list_head_into_a_live_block_is_refused() {
    let mut built = every_kind();
    let (class, _) = size_class(64);
    built
        .ks
        .arena
        .write_u32(NULL, FREE_HEADS_OFFSET + class * 4, built.string);
    let err = load_error(&image_of(&built.ks, "freehead"));
    assert!(
        err.contains("free-list block") || err.contains("overlaps"),
        "{err}"
    );
}

#[test]
fn a_dict_table_ref_outside_the_arena_is_refused() {
    let mut built = every_kind();
    let dbs = built.ks.arena.root(0) as Ref;
    // Database 0's DictHeader starts with its table refs.
    built.ks.arena.write_u32(dbs, 0, 0x0FFF_FFF0);
    let err = load_error(&image_of(&built.ks, "table"));
    assert!(err.contains("dict bucket array"), "{err}");
}

#[test]
fn a_damaged_listpack_byte_is_refused() {
    let mut built = every_kind();
    let e = built.hash_inline;
    let key_len = built.ks.arena.read_u32(e, 4) as usize;
    let val_len = built.ks.arena.read_u32(e, 8) as usize;
    // The last element's backlen, just before the listpack's 0xFF end.
    let at = ENTRY_HEADER_BYTES + key_len + val_len - 2;
    built.ks.arena.bytes_mut(e, at, 1)[0] ^= 0x7F;
    let err = load_error(&image_of(&built.ks, "listpack"));
    assert!(
        err.contains("hash value is neither a valid listpack"),
        "{err}"
    );
}

#[test]
fn a_skiplist_span_that_lies_is_refused() {
    let mut built = every_kind();
    let e = built.ks.find_raw(1, b"zset-sl").unwrap();
    let head = u32::from_le_bytes(built.ks.value(e)[4..8].try_into().unwrap());
    // The head's level-0 span (head node: 24-byte header, no member, then (forward, span)).
    built.ks.arena.write_u32(head, 24 + 4, 5);
    let err = load_error(&image_of(&built.ks, "span"));
    assert!(err.contains("skiplist link or span at level 0"), "{err}");
}

#[test]
fn overlapping_extents_in_a_freeze_free_image_are_refused() {
    let built = every_kind();
    let good = image_of(&built.ks, "mode3");
    let header = ImageHeader::decode(good[..256].try_into().unwrap()).unwrap();
    let arena_bytes = header.arena_bytes as usize;
    let bytes = built
        .ks
        .arena
        .bytes(NULL, 0, built.ks.arena.bump_bytes() as usize)
        .to_vec();
    let mut raw = bytes;
    raw.resize(arena_bytes, 0);
    let dir = std::env::temp_dir().join(format!("cairn-crafted-m3-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("dump.cimg");
    let mut w = ImageWriter::create(&path, false).unwrap();
    for (i, chunk) in raw.chunks(1 << 20).enumerate() {
        let extent = Extent {
            offset: (i << 20) as u64,
            len: chunk.len() as u32,
        };
        w.write_record(&Record::encode(vec![extent], chunk))
            .unwrap();
    }
    // A second copy of one page, as two threads of one wave would write it.
    let page = Extent {
        offset: 4096,
        len: 4096,
    };
    w.write_record(&Record::encode(vec![page], &raw[4096..8192]))
        .unwrap();
    let mut h = header;
    h.mode = CutMode::UffdSync;
    w.commit(&h).unwrap();
    let image = std::fs::read(&path).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let err = load_error(&image);
    assert!(err.contains("overlaps an earlier extent"), "{err}");
}

/// Found by the `snapshot_image` fuzz target: an image whose header counts 4 requested
/// bytes more than its blocks asked for passed the load (that counter was only bounded),
/// and once every key was deleted the counter exceeded the bytes in use. Every counter
/// of the allocator must be exactly what the structures hold.
#[test]
fn fuzz_regression_a_requested_bytes_counter_that_lies_is_refused() {
    let mut image = include_bytes!("data/fuzz-snapshot_image-requested-bytes.cimg").to_vec();
    reseal(&mut image);
    let err = load_error(&image);
    assert!(err.contains("requested bytes"), "{err}");
}
