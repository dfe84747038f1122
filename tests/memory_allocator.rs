//! MEMORY PURGE and MEMORY MALLOC-STATS: the same answers as redis-server where the two
//! can agree (HELP, PURGE, errors), and an allocator report whose arena figures follow
//! the data.
mod common;
use common::*;

#[test]
fn help_purge_and_errors_match_redis() {
    let (_c, _r, mut rc, mut rr) = both(&[]);
    for cmd in [
        &["MEMORY", "HELP"][..],
        &["MEMORY", "PURGE"],
        &["MEMORY", "PURGE", "x"],
        &["MEMORY", "MALLOC-STATS", "x"],
    ] {
        same_str(&mut rc, &mut rr, cmd);
    }
}

fn stat(report: &str, name: &str) -> u64 {
    report
        .lines()
        .find_map(|l| l.trim().strip_prefix(&format!("{name}: ")))
        .unwrap_or_else(|| panic!("{name} in {report}"))
        .parse()
        .unwrap()
}

#[test]
fn malloc_stats_report_follows_the_arena() {
    let c = start_cairn(&[]);
    let mut raw = Raw::connect(c.port);
    let report = |raw: &mut Raw| {
        String::from_utf8(bulk_payload(&raw.call(&["MEMORY", "MALLOC-STATS"]))).unwrap()
    };
    let before = report(&mut raw);
    assert!(
        before.starts_with("___ Begin cairn allocator statistics ___\n"),
        "{before}"
    );
    for name in ["in_use_bytes", "free_bytes", "arena_bytes"] {
        stat(&before, name);
    }
    let big = "x".repeat(1 << 20);
    raw.call(&["SET", "big", &big]);
    let after = report(&mut raw);
    assert!(stat(&after, "used_bytes") >= stat(&before, "used_bytes") + (1 << 20));
    assert!(stat(&after, "live_blocks") > stat(&before, "live_blocks"));
    raw.call(&["DEL", "big"]);
    // A big value may be freed by the lazy-free cron, after the DEL's reply.
    wait_until(DEADLINE, "the value's block is freed", || {
        let freed = report(&mut raw);
        stat(&freed, "used_bytes") < stat(&after, "used_bytes") - (1 << 20)
            && stat(&freed, "free_list_bytes_large") >= 1 << 20
    });
    assert_eq!(raw.call(&["MEMORY", "PURGE"]), b"+OK\r\n");
}
