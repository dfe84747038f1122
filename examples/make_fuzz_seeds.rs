//! Writes the seed corpora of the cargo-fuzz targets (`fuzz/corpus/<target>/`) from a
//! small keyspace holding every kind of structure: snapshot images (one as SAVE writes
//! it, one with raw records so the fuzzer's byte flips land in the arena itself), an RDB
//! file, DUMP payload bodies and a redis.conf. Run it again when a format changes:
//! `cargo run --example make_fuzz_seeds -- fuzz/corpus`.

use cairn::arena::{Arena, NULL};
use cairn::collections::{hash, list, set, stream, zset};
use cairn::keyspace::{Keyspace, Kind, StrEnc, Ttl};
use cairn::persistence::rdb_file;
use cairn::persistence::snapshot::format::{self, Extent, ImageWriter, Record};
use cairn::persistence::snapshot::{save_blocking, SnapMode, SnapParams};
use std::path::Path;

fn main() {
    let out = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "fuzz/corpus".into());
    let out = Path::new(&out);
    let ks = small_keyspace(true);
    let dir = |target: &str| {
        let d = out.join(target);
        std::fs::create_dir_all(&d).unwrap();
        d
    };
    snapshot_seeds(&ks, &small_keyspace(false), &dir("snapshot_image"));
    let mut ks = ks;
    let mut rdb = Vec::new();
    rdb_file::write_rdb(&mut ks, &mut rdb, &[], 0).unwrap();
    std::fs::write(dir("rdb_file").join("every-kind.rdb"), &rdb).unwrap();
    let restore = dir("restore_payload");
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
            let mut body = Vec::new();
            if rdb_file::write_object(&ks, e, &mut body).is_ok() {
                let name = String::from_utf8_lossy(ks.key(e)).into_owned();
                std::fs::write(restore.join(name), &body).unwrap();
            }
        }
    }
    std::fs::write(
        dir("config_text").join("redis.conf"),
        "# a few of each kind of option\nport 6380\nbind 127.0.0.1 -::1\nsave 900 1 300 10\n\
         maxmemory 100mb\nmaxmemory-policy allkeys-lru\nappendonly yes\n\
         client-output-buffer-limit pubsub 32mb 8mb 60\nnotify-keyspace-events KEA\n\
         list-max-listpack-size -2\nhash-max-listpack-entries 128\nrename-command FLUSHALL \"\"\n",
    )
    .unwrap();
}

/// Every structure the image validation walks, kept small (the TTL index alone takes a
/// 64 KiB chunk, so the raw image goes without it).
fn small_keyspace(with_ttl: bool) -> Keyspace {
    let mut ks = cairn::collections::new_keyspace(Arena::new(1 << 20, [5, 6]).unwrap(), 3);
    ks.set_string(0, b"s", b"v", StrEnc::Embstr, Ttl::Clear);
    let ttl = if with_ttl {
        Ttl::At(i64::MAX / 4)
    } else {
        Ttl::Clear
    };
    ks.set_string(0, b"n", b"12", StrEnc::Int, ttl);
    let lp = |v: &[&[u8]]| cairn::collections::listpack::build(v.iter().copied());
    list::create_from(&mut ks, 0, b"l", &[lp(&[b"a", b"b"])], Ttl::Clear);
    list::create_from(
        &mut ks,
        0,
        b"q",
        &[lp(&[b"a", b"1"]), lp(&[b"c"])],
        Ttl::Clear,
    );
    let tiny_hash = hash::Limits {
        max_entries: 1,
        max_value: 64,
    };
    let pairs: Vec<(Vec<u8>, Vec<u8>)> = (0..3).map(|i| (vec![b'f', i], vec![b'v', i])).collect();
    hash::create_from(&mut ks, 0, b"hl", &pairs[..1], Ttl::Clear, tiny_hash);
    hash::create_from(&mut ks, 1, b"ht", &pairs, Ttl::Clear, tiny_hash);
    let tiny_set = set::Limits {
        max_intset: 4,
        max_lp_entries: 2,
        max_lp_value: 64,
    };
    let ints: Vec<Vec<u8>> = (0..3).map(|i| i.to_string().into_bytes()).collect();
    let words: Vec<Vec<u8>> = (0..3).map(|i| vec![b'm', i]).collect();
    set::create_from(&mut ks, 0, b"si", &ints, Ttl::Clear, tiny_set);
    set::create_from(&mut ks, 0, b"sl", &words[..2], Ttl::Clear, tiny_set);
    set::create_from(&mut ks, 1, b"st", &words, Ttl::Clear, tiny_set);
    let tiny_zset = zset::Limits {
        max_entries: 2,
        max_value: 64,
    };
    let scored: zset::Pairs = (0..4).map(|i| (vec![b'z', i], i as f64 / 2.0)).collect();
    zset::create_from(
        &mut ks,
        0,
        b"zl",
        scored[..2].to_vec(),
        Ttl::Clear,
        tiny_zset,
    );
    zset::create_from(&mut ks, 1, b"zs", scored, Ttl::Clear, tiny_zset);
    // A stream of three nodes (two entries each), one entry deleted.
    let node_limits = stream::Limits {
        max_bytes: 4096,
        max_entries: 2,
    };
    let mut m = stream::Meta::default();
    for ms in 1..=6u64 {
        let v = ms.to_string().into_bytes();
        let f: &[u8] = if ms == 3 { b"other" } else { b"f" };
        stream::append(
            &mut ks.arena,
            &mut m,
            stream::Id::new(ms, 0),
            &[f, &v],
            node_limits,
        );
    }
    stream::delete(&mut ks.arena, &mut m, stream::Id::new(4, 0));
    // A consumer group with two consumers and pending entries (one of a deleted entry).
    {
        use cairn::collections::stream_groups as sg;
        let a = &mut ks.arena;
        let g = sg::create_group(a, &mut m.groups, b"g", stream::Id::new(5, 0), 5).unwrap();
        let c1 = sg::create_consumer(a, g, b"c1", 1000).unwrap();
        let c2 = sg::create_consumer(a, g, b"c2", 2000).unwrap();
        for (ms, c) in [(1u64, c1), (2, c2), (4, c1), (5, c2)] {
            sg::pel_add(a, g, c, stream::Id::new(ms, 0), 1500, ms);
        }
        sg::create_group(a, &mut m.groups, b"empty", stream::Id::MIN, -1).unwrap();
    }
    ks.set_value(
        1,
        b"x",
        Kind::Stream,
        stream::ENC_STREAM,
        &m.encode(),
        Ttl::Clear,
    );
    ks.set_string(2, b"flushed", b"x", StrEnc::Embstr, Ttl::Clear);
    ks.flush_db(2);
    ks
}

fn snapshot_seeds(ks: &Keyspace, small: &Keyspace, dir: &Path) {
    let params = SnapParams {
        path: dir.join("saved.cimg"),
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
    // An arena in raw records of 1 KiB (the loader refuses nothing about that).
    let saved = std::fs::read(dir.join("saved.cimg")).unwrap();
    let mut header =
        format::ImageHeader::decode(saved[..format::HEADER_BYTES].try_into().unwrap()).unwrap();
    let bump = small.arena.bump_bytes() as usize;
    header.arena_bytes = bump as u64;
    let raw = small.arena.bytes(NULL, 0, bump);
    let mut w = ImageWriter::create(&dir.join("raw.cimg"), false).unwrap();
    for (i, chunk) in raw.chunks(1024).enumerate() {
        w.write_record(&Record {
            extents: vec![Extent {
                offset: (i * 1024) as u64,
                len: chunk.len() as u32,
            }],
            flags: 0,
            payload: chunk.to_vec(),
            raw_bytes: chunk.len() as u32,
        })
        .unwrap();
    }
    w.commit(&header).unwrap();
}
