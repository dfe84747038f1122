//! The arena allocator reuses freed memory: 10 million random overwrites and deletes keep
//! `used_memory` within 10 % of the live data and RSS bounded (it stops growing once the
//! working set is reached, instead of leaking as a bump allocator would).

use cairn::arena::Arena;
use cairn::keyspace::{StrEnc, Ttl};
use cairn::util::Rng;

fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

#[test]
fn ten_million_overwrites_and_deletes_do_not_leak() {
    const KEYS: u64 = 200_000;
    const OPS: u64 = 10_000_000;
    let mut ks = cairn::collections::new_keyspace(Arena::new(8 << 30, [11, 13]).unwrap(), 1);
    let mut rng = Rng::new(7);
    let value = vec![b'v'; 400];
    let mut live_payload: std::collections::HashMap<u64, usize> = std::collections::HashMap::new();
    let mut rss_mid = 0;
    for op in 0..OPS {
        let k = rng.below(KEYS);
        let key = format!("key:{k:08}");
        if rng.below(10) < 3 {
            ks.delete(0, key.as_bytes(), 0);
            live_payload.remove(&k);
        } else {
            // Sizes vary widely so blocks move between size classes.
            let len = 1 + rng.below(400) as usize;
            let ttl = if rng.below(4) == 0 {
                Ttl::At(i64::MAX / 4)
            } else {
                Ttl::Clear
            };
            ks.set_string(0, key.as_bytes(), &value[..len], StrEnc::Raw, ttl);
            live_payload.insert(k, key.len() + len);
        }
        if op % 4096 == 0 {
            ks.rehash_step_all(100);
        }
        if op == OPS / 2 {
            rss_mid = rss_bytes();
        }
    }
    let used = ks.arena.used_bytes();
    let live = ks.arena.requested_bytes();
    let payload: usize = live_payload.values().sum();
    let (free_small, free_large) = ks.arena.free_list_bytes();
    let rss_end = rss_bytes();
    eprintln!(
        "keys={} used={used} live(requested)={live} payload={payload} free_lists={} rss_mid={rss_mid} rss_end={rss_end}",
        ks.dbsize(0),
        free_small + free_large
    );
    assert_eq!(ks.dbsize(0) as usize, live_payload.len());
    // used_memory counts blocks at their class size: within 10 % of the live data.
    assert!(
        used as f64 <= live as f64 * 1.10,
        "used {used} vs live {live}"
    );
    // Memory sitting in free lists stays a fraction of the live data (no leak per op).
    assert!(
        ((free_small + free_large) as f64) < live as f64 * 0.5,
        "free lists {}",
        free_small + free_large
    );
    // RSS stopped growing in the second half of the run (working set reached).
    assert!(
        rss_end as f64 <= rss_mid as f64 * 1.05,
        "rss grew from {rss_mid} to {rss_end}"
    );
    // And RSS is bounded by what the arena holds (live + free lists), plus the test's own map.
    assert!(
        rss_end < (used + free_small + free_large) * 3 + (64 << 20),
        "rss {rss_end}"
    );
}
