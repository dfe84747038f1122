//! Deleting a 10-million-element collection does not stall the executor: the list is
//! detached in O(1) onto the value graveyard and freed in slices by the cron (asserted
//! through INFO's lazy-free counters; the PING latencies while it frees are printed, and
//! are a benchmark's business, not a test's), and the memory comes back.

mod common;
use common::*;
use std::time::{Duration, Instant};

#[test]
fn del_of_ten_million_elements_keeps_ping_fast() {
    let c = start_cairn(&[]);
    let mut w = Raw::connect(c.port);
    w.s.set_read_timeout(Some(Duration::from_secs(120)))
        .unwrap();
    let before = used_memory(&mut w);
    let batch: Vec<String> = (0..10_000).map(|i| format!("e{i}")).collect();
    let mut args: Vec<&[u8]> = vec![b"RPUSH", b"big"];
    args.extend(batch.iter().map(|s| s.as_bytes()));
    let cmd = encode(&args);
    // 1000 pipelined pushes of 10,000 elements, 50 in flight.
    for i in 0..1000 {
        w.send(&cmd);
        if i >= 50 {
            w.reply();
        }
    }
    for _ in 0..50 {
        w.reply();
    }
    assert_eq!(w.call(&["LLEN", "big"]), b":10000000\r\n");
    let grown = used_memory(&mut w);
    assert!(grown > before + 50_000_000, "{before} -> {grown}");

    let mut probe = Raw::connect(c.port);
    let lazyfreed_before = probe.info_u64("memory", "lazyfreed_objects");
    let t = Instant::now();
    assert_eq!(w.call(&["DEL", "big"]), b":1\r\n");
    assert_eq!(probe.call(&["PING"]), b"+PONG\r\n");
    let del_and_ping = t.elapsed();
    // While the cron frees the nodes, PING stays fast.
    let mut worst = Duration::ZERO;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let t = Instant::now();
        assert_eq!(probe.call(&["PING"]), b"+PONG\r\n");
        worst = worst.max(t.elapsed());
        if used_memory(&mut probe) < before + 1_000_000 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the list's memory did not come back"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    eprintln!("DEL + PING {del_and_ping:?}, worst PING while freeing {worst:?}");
    // The list went through the graveyard (freed in slices), not inline in DEL.
    assert!(probe.info_u64("memory", "lazyfreed_objects") > lazyfreed_before);
}
