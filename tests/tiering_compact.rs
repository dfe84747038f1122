//! Compaction of the tier file's shared pages (`tiered-prefix`): after most small cold
//! values are deleted the compactor moves the survivors into fresh pages until the
//! file's space amplification is at most 2, every value byte-exact; keys deleted,
//! overwritten or read while their page is being compacted end as the commands left
//! them; a kill -9 mid-compaction restarts from the last snapshot byte-exact; a
//! compaction read that fails (EIO, a damaged page) moves nothing, and every key then
//! reads exact or, where its own page is damaged, fails naming the key.

mod common;
use common::*;
use std::path::Path;
use std::time::Duration;

const MAXMEMORY: u64 = 4 << 20;

fn start_tiered(dir: &Path) -> Srv {
    let prefix = dir.join("tier").display().to_string();
    let prefix: &'static str = Box::leak(prefix.into_boxed_str());
    start_on(
        dir,
        &[
            "--save",
            "",
            "--maxmemory",
            "4mb",
            "--enable-debug-command",
            "yes",
            "--tiered-prefix",
            prefix,
        ],
        &[],
    )
}

/// Values of 200 to 1500 bytes (several share a page), the first 8 bytes `i`.
fn small_values(n: usize, seed: u64) -> Vec<Vec<u8>> {
    let mut rng = Lcg(seed);
    (0..n)
        .map(|i| {
            let len = 200 + rng.below(1300) as usize;
            let mut v: Vec<u8> = (0..len).map(|_| rng.below(256) as u8).collect();
            v[..8].copy_from_slice(&(i as u64).to_le_bytes());
            v
        })
        .collect()
}

/// ~3× maxmemory of small values under `k<i>`.
fn load(raw: &mut Raw, values: &[Vec<u8>]) {
    let cmds: Vec<Vec<Vec<u8>>> = values
        .iter()
        .enumerate()
        .map(|(i, v)| vec![b"SET".to_vec(), format!("k{i}").into_bytes(), v.clone()])
        .collect();
    run_all_making_room(raw, &cmds, b"+OK", MAXMEMORY);
}

/// Indexes of the keys `k<i>` that are cold now (pipelined DEBUG TIERED-STATE).
fn cold_indexes(raw: &mut Raw, n: usize) -> Vec<usize> {
    let mut out = Vec::new();
    for start in (0..n).step_by(500) {
        let end = (start + 500).min(n);
        let mut buf = Vec::new();
        for i in start..end {
            buf.extend_from_slice(&encode(&[
                b"DEBUG",
                b"TIERED-STATE",
                format!("k{i}").as_bytes(),
            ]));
        }
        raw.send(&buf);
        for i in start..end {
            if raw.reply() == b"+cold\r\n" {
                out.push(i);
            }
        }
    }
    out
}

/// Deletes a random `pct` % of `idx` (pipelined); the deleted indexes.
fn delete_some(raw: &mut Raw, idx: &[usize], pct: u64, seed: u64) -> Vec<usize> {
    let mut rng = Lcg(seed);
    let gone: Vec<usize> = idx
        .iter()
        .copied()
        .filter(|_| rng.below(100) < pct)
        .collect();
    for chunk in gone.chunks(500) {
        let mut buf = Vec::new();
        for i in chunk {
            buf.extend_from_slice(&encode(&[b"DEL", format!("k{i}").as_bytes()]));
        }
        raw.send(&buf);
        for _ in chunk {
            assert_eq!(raw.reply(), b":1\r\n");
        }
    }
    gone
}

/// Every `k<i>` holds `want[i]` (None: absent), pipelined.
fn check(raw: &mut Raw, want: &[Option<Vec<u8>>]) {
    for start in (0..want.len()).step_by(200) {
        let end = (start + 200).min(want.len());
        let mut buf = Vec::new();
        for i in start..end {
            buf.extend_from_slice(&encode(&[b"GET", format!("k{i}").as_bytes()]));
        }
        raw.send(&buf);
        for (i, w) in want.iter().enumerate().take(end).skip(start) {
            let r = raw.reply();
            match w {
                Some(v) => assert_eq!(r, bulk(v), "k{i} differs"),
                None => assert_eq!(r, b"$-1\r\n", "k{i} should be gone"),
            }
        }
    }
}

/// Whether compaction runs while [`cold_then_most_deleted`] deletes.
#[derive(PartialEq)]
enum Compaction {
    Paused,
    Running,
}

/// 14,000 small values (seeded by `values_seed`) loaded until most are cold, compaction
/// paused and idle first if asked, then 80 % of the cold ones deleted (chosen by
/// `delete_seed`). Returns the cold indexes and what each key must now read (None:
/// deleted).
fn cold_then_most_deleted(
    raw: &mut Raw,
    values_seed: u64,
    delete_seed: u64,
    compaction: Compaction,
) -> (Vec<usize>, Vec<Option<Vec<u8>>>) {
    let values = small_values(14_000, values_seed);
    load(raw, &values);
    let cold = cold_indexes(raw, values.len());
    assert!(cold.len() > 5000, "only {} cold values", cold.len());
    if compaction == Compaction::Paused {
        assert_eq!(raw.call(&["DEBUG", "TIERED-COMPACT", "0"]), b"+OK\r\n");
        wait_until(DEADLINE, "compaction moves end", || {
            raw.info_u64("tiered", "tiered_compaction_moves_pending") == 0
        });
    }
    let gone = delete_some(raw, &cold, 80, delete_seed);
    let mut want: Vec<Option<Vec<u8>>> = values.iter().cloned().map(Some).collect();
    for &i in &gone {
        want[i] = None;
    }
    (cold, want)
}

fn amplification(raw: &mut Raw) -> f64 {
    raw.info_field("tiered", "tiered_space_amplification")
        .parse()
        .unwrap()
}

#[test]
fn deleting_most_small_cold_values_is_compacted_to_amplification_two() {
    let dir = temp_dir("tcomp-amp");
    let srv = start_tiered(&dir);
    let mut raw = Raw::connect(srv.port);
    // The deletes' own effect first: compaction paused until it is measured.
    let (_, want) = cold_then_most_deleted(&mut raw, 5, 9, Compaction::Paused);
    // Right after the deletes the surviving records are scattered: one or two a page.
    let allocated = raw.info_u64("tiered", "tiered_allocated_bytes");
    assert!(
        amplification(&mut raw) > 2.0,
        "the deletes left sparse pages"
    );
    assert_eq!(raw.call(&["DEBUG", "TIERED-COMPACT", "1"]), b"+OK\r\n");
    println!(
        "after the deletes: {} bytes allocated, amplification {}",
        allocated,
        raw.info_field("tiered", "tiered_space_amplification")
    );
    wait_until(
        Duration::from_secs(120),
        "space amplification ≤ 2",
        || amplification(&mut raw) <= 2.0,
    );
    let after = raw.info_u64("tiered", "tiered_allocated_bytes");
    println!(
        "compacted: {} bytes allocated, amplification {}, {} pages compacted, {} records moved, {} uncooled, write amplification {}",
        after,
        raw.info_field("tiered", "tiered_space_amplification"),
        raw.info_u64("tiered", "tiered_compactions"),
        raw.info_u64("tiered", "tiered_compaction_moved_records"),
        raw.info_u64("tiered", "tiered_compaction_uncooled"),
        raw.info_field("tiered", "tiered_write_amplification"),
    );
    // Fewer pages, though the pass goes on stashing values still in RAM and each move
    // in flight holds two places: amplification is the measure, this only the sign.
    assert!(after < allocated, "allocated bytes {allocated} → {after}");
    assert!(raw.info_u64("tiered", "tiered_compactions") > 0);
    assert!(raw.info_u64("tiered", "tiered_compaction_moved_records") > 100);
    // Bytes written to the file per value byte stashed, moves included: compaction takes
    // the sparsest pages first, so it moves few records per page it frees.
    let wa: f64 = raw
        .info_field("tiered", "tiered_write_amplification")
        .parse()
        .unwrap();
    assert!(wa <= 2.0, "write amplification {wa}");
    // Values moved are still cold: served from their new places.
    assert!(raw.info_u64("tiered", "tiered_entries") > 500);
    check(&mut raw, &want);
    assert_eq!(raw.info_u64("tiered", "tiered_read_errors"), 0);
    assert_eq!(raw.info_u64("tiered", "tiered_sync_read_errors"), 0);
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn deletes_while_compaction_runs_write_at_most_twice_the_bytes_stashed() {
    let dir = temp_dir("tcomp-wa");
    let srv = start_tiered(&dir);
    let mut raw = Raw::connect(srv.port);
    // The compactor runs during the deletes: a record it moves may be deleted next, and
    // a page it fills may turn sparse again.
    let (_, want) = cold_then_most_deleted(&mut raw, 7, 11, Compaction::Running);
    wait_until(
        Duration::from_secs(120),
        "space amplification ≤ 2, no move in flight",
        || {
            amplification(&mut raw) <= 2.0
                && raw.info_u64("tiered", "tiered_compaction_moves_pending") == 0
        },
    );
    // Where compaction stops (1.5), if it gets there: every move it makes counts.
    let _ = poll_until(Duration::from_secs(30), || {
        amplification(&mut raw) <= 1.5
            && raw.info_u64("tiered", "tiered_compaction_moves_pending") == 0
    });
    let wa: f64 = raw
        .info_field("tiered", "tiered_write_amplification")
        .parse()
        .unwrap();
    println!(
        "space amplification {}, write amplification {wa}, {} records moved, {} partly filled pages written",
        raw.info_field("tiered", "tiered_space_amplification"),
        raw.info_u64("tiered", "tiered_compaction_moved_records"),
        raw.info("tiered", "tiered_partial_page_writes").unwrap_or_default(),
    );
    assert!(raw.info_u64("tiered", "tiered_compaction_moved_records") > 100);
    assert!(wa <= 2.0, "write amplification {wa}");
    check(&mut raw, &want);
    assert_eq!(raw.info_u64("tiered", "tiered_read_errors"), 0);
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn values_just_over_a_page_take_at_most_twice_their_bytes() {
    let dir = temp_dir("tcomp-4100");
    let srv = start_tiered(&dir);
    let mut raw = Raw::connect(srv.port);
    // 4100-byte values: records of 4114 bytes or so, over a page's 4088-byte payload, so
    // each takes two pages of its own.
    let mut rng = Lcg(61);
    let values: Vec<Vec<u8>> = (0..3000u64)
        .map(|i| {
            let mut v: Vec<u8> = (0..4100).map(|_| rng.below(256) as u8).collect();
            v[..8].copy_from_slice(&i.to_le_bytes());
            v
        })
        .collect();
    load(&mut raw, &values);
    let cold = cold_indexes(&mut raw, values.len());
    assert!(cold.len() > 1000, "only {} cold values", cold.len());
    let gone = delete_some(&mut raw, &cold, 50, 63);
    let mut want: Vec<Option<Vec<u8>>> = values.iter().cloned().map(Some).collect();
    for &i in &gone {
        want[i] = None;
    }
    wait_until(DEADLINE, "no write in flight", || {
        raw.info_u64("tiered", "tiered_pending_stash_cnt") == 0
    });
    let sa = amplification(&mut raw);
    assert!(sa <= 2.0, "space amplification {sa}");
    assert!(raw.info_u64("tiered", "tiered_allocated_bytes") > 1 << 20);
    check(&mut raw, &want);
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn records_just_over_half_a_page_or_a_page_take_at_most_twice_their_bytes() {
    let dir = temp_dir("tcomp-edge");
    let srv = start_tiered(&dir);
    let mut raw = Raw::connect(srv.port);
    // Records (8-byte header + key + value) of 2045 to 2047 bytes, which share a page
    // only as a pair page, and of 4089 to 4095 bytes, one byte to seven over a page's
    // payload, which take one page as whole-page records: placed as the other records
    // are, each would hold 4096 bytes for under 2048, or 8192 for under 4096.
    let sizes = [
        2045usize, 2046, 2047, 4089, 4090, 4091, 4092, 4093, 4094, 4095,
    ];
    let mut rng = Lcg(71);
    let values: Vec<Vec<u8>> = (0..3000usize)
        .map(|i| {
            let len = sizes[i % sizes.len()] - 8 - format!("k{i}").len();
            let mut v: Vec<u8> = (0..len).map(|_| rng.below(256) as u8).collect();
            v[..8].copy_from_slice(&(i as u64).to_le_bytes());
            v
        })
        .collect();
    load(&mut raw, &values);
    let cold = cold_indexes(&mut raw, values.len());
    assert!(cold.len() > 1000, "only {} cold values", cold.len());
    let settled = |raw: &mut Raw| {
        amplification(raw) <= 2.0
            && raw.info_u64("tiered", "tiered_pending_stash_cnt") == 0
            && raw.info_u64("tiered", "tiered_compaction_moves_pending") == 0
    };
    wait_until(
        Duration::from_secs(120),
        "space amplification ≤ 2",
        || settled(&mut raw),
    );
    let mut want: Vec<Option<Vec<u8>>> = values.iter().cloned().map(Some).collect();
    check(&mut raw, &want);
    // Half of the cold ones deleted: pair pages left with one record are compacted.
    for i in delete_some(&mut raw, &cold, 50, 73) {
        want[i] = None;
    }
    wait_until(
        Duration::from_secs(120),
        "space amplification ≤ 2 after the deletes",
        || settled(&mut raw),
    );
    println!(
        "space amplification {}, {} records moved",
        raw.info_field("tiered", "tiered_space_amplification"),
        raw.info_u64("tiered", "tiered_compaction_moved_records"),
    );
    assert!(raw.info_u64("tiered", "tiered_allocated_bytes") > 1 << 20);
    check(&mut raw, &want);
    assert_eq!(raw.info_u64("tiered", "tiered_read_errors"), 0);
    assert_eq!(raw.info_u64("tiered", "tiered_sync_read_errors"), 0);
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn keys_changed_while_their_page_is_compacted_end_as_the_commands_left_them() {
    let dir = temp_dir("tcomp-race");
    let srv = start_tiered(&dir);
    let mut raw = Raw::connect(srv.port);
    let values = small_values(14_000, 21);
    load(&mut raw, &values);
    let cold = cold_indexes(&mut raw, values.len());
    assert!(cold.len() > 5000, "only {} cold values", cold.len());
    // The compactor's moves wait in the I/O thread: their records are placed anew but
    // the stubs still name the old places.
    assert_eq!(raw.call(&["DEBUG", "TIERED-HOLD-WRITES", "1"]), b"+OK\r\n");
    let gone = delete_some(&mut raw, &cold, 80, 23);
    let mut want: Vec<Option<Vec<u8>>> = values.iter().cloned().map(Some).collect();
    for &i in &gone {
        want[i] = None;
    }
    wait_until(DEADLINE, "compaction moves are in flight", || {
        raw.info_u64("tiered", "tiered_compaction_moves_pending") >= 50
    });
    // Survivors: a third deleted, a third overwritten, a third read (from the old
    // place: its record stays until the move is decided).
    let survivors: Vec<usize> = cold
        .iter()
        .copied()
        .filter(|i| want[*i].is_some())
        .collect();
    let mut cmds: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    for (n, &i) in survivors.iter().enumerate() {
        let k = format!("k{i}");
        match n % 3 {
            0 => {
                cmds.push((encode(&[b"DEL", k.as_bytes()]), b":1\r\n".to_vec()));
                want[i] = None;
            }
            1 => {
                let v = format!("new-{i}").repeat(30).into_bytes();
                cmds.push((encode(&[b"SET", k.as_bytes(), &v]), b"+OK\r\n".to_vec()));
                want[i] = Some(v);
            }
            _ => {
                let v = want[i].as_ref().unwrap();
                cmds.push((encode(&[b"GET", k.as_bytes()]), bulk(v)));
            }
        }
    }
    for batch in cmds.chunks(300) {
        let buf: Vec<u8> = batch.iter().flat_map(|(c, _)| c.clone()).collect();
        raw.send(&buf);
        for (c, e) in batch {
            assert_eq!(&raw.reply(), e, "{}", show(c));
        }
    }
    assert!(raw.info_u64("tiered", "tiered_compaction_moves_pending") > 0);
    assert_eq!(raw.call(&["DEBUG", "TIERED-HOLD-WRITES", "0"]), b"+OK\r\n");
    wait_until(DEADLINE, "the moves are decided", || {
        raw.info_u64("tiered", "tiered_compaction_moves_pending") == 0
    });
    check(&mut raw, &want);
    // Once more after the values read back went cold again, or moved.
    wait_until(
        Duration::from_secs(120),
        "space amplification ≤ 2",
        || amplification(&mut raw) <= 2.0,
    );
    check(&mut raw, &want);
    assert_eq!(raw.info_u64("tiered", "tiered_read_errors"), 0);
    assert_eq!(raw.info_u64("tiered", "tiered_sync_read_errors"), 0);
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_kill_during_compaction_restarts_from_the_snapshot_byte_exact() {
    let dir = temp_dir("tcomp-kill");
    let srv = start_tiered(&dir);
    let mut raw = Raw::connect(srv.port);
    let values = small_values(14_000, 31);
    load(&mut raw, &values);
    let cold = cold_indexes(&mut raw, values.len());
    assert!(cold.len() > 5000, "only {} cold values", cold.len());
    assert!(raw.call(&["BGSAVE"]).starts_with(b"+"));
    wait_until(DEADLINE, "the BGSAVE ends", || {
        raw.info_field("persistence", "rdb_bgsave_in_progress") == "0"
    });
    assert_eq!(
        raw.info_field("persistence", "rdb_last_bgsave_status"),
        "ok"
    );
    // The deletes make the compactor run; its writes are held so the kill lands while
    // moves are in flight and others are being placed.
    assert_eq!(raw.call(&["DEBUG", "TIERED-HOLD-WRITES", "1"]), b"+OK\r\n");
    delete_some(&mut raw, &cold, 80, 33);
    wait_until(DEADLINE, "compaction moves are in flight", || {
        raw.info_u64("tiered", "tiered_compaction_moves_pending") >= 20
    });
    drop(raw);
    drop(srv); // SIGKILL
    let srv = start_tiered(&dir);
    let mut raw = Raw::connect(srv.port);
    assert_eq!(
        raw.call(&["DBSIZE"]),
        format!(":{}\r\n", values.len()).into_bytes()
    );
    assert!(raw.info_u64("tiered", "tiered_entries") > 1000);
    let want: Vec<Option<Vec<u8>>> = values.iter().cloned().map(Some).collect();
    check(&mut raw, &want);
    assert_eq!(raw.info_u64("tiered", "tiered_read_errors"), 0);
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The keys `k<i>` whose records the tier file's written pages hold, page by page (a
/// record stays in a freed page until the page is written again, so a key may be found
/// in more than one page): the records of each page's payload, as `page.rs` lays them out.
fn keys_by_page(file: &[u8]) -> Vec<(usize, Vec<usize>)> {
    let mut out = Vec::new();
    for (n, page) in file.chunks_exact(4096).enumerate() {
        let payload = &page[8..];
        let mut keys = Vec::new();
        let mut at = 0usize;
        while at + 8 <= payload.len() {
            let w = |i: usize| u32::from_le_bytes(payload[i..i + 4].try_into().unwrap()) as usize;
            let (kl, vl) = (w(at), w(at + 4));
            let end = at + 8 + kl + vl;
            if (kl == 0 && vl == 0) || end > payload.len() {
                break;
            }
            let key = &payload[at + 8..at + 8 + kl];
            if let Some(i) = std::str::from_utf8(key)
                .ok()
                .and_then(|k| k.strip_prefix('k'))
                .and_then(|i| i.parse().ok())
            {
                keys.push(i);
            }
            at = end;
        }
        if !keys.is_empty() {
            out.push((n, keys));
        }
    }
    out
}

#[test]
fn a_failed_compaction_read_moves_nothing_and_each_key_reads_exact_or_fails_by_name() {
    let dir = temp_dir("tcomp-fail");
    let srv = start_tiered(&dir);
    let mut raw = Raw::connect(srv.port);
    let (cold, want) = cold_then_most_deleted(&mut raw, 41, 43, Compaction::Paused);
    // Damage pages left with one surviving cold record (sparse: compaction reads them):
    // a flipped byte at the end of the page, inside its checksum's cover.
    let is_cold: std::collections::HashSet<usize> = cold.iter().copied().collect();
    let path = dir.join("tier-0000.ssd");
    let file = std::fs::read(&path).unwrap();
    let pages = keys_by_page(&file);
    let damaged: Vec<&(usize, Vec<usize>)> = pages
        .iter()
        .filter(|(_, keys)| {
            keys.iter()
                .filter(|&&i| want[i].is_some() && is_cold.contains(&i))
                .count()
                == 1
        })
        .take(8)
        .collect();
    assert_eq!(damaged.len(), 8, "pages with one surviving record");
    {
        use std::io::{Seek, SeekFrom, Write};
        let mut f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        for (page, _) in &damaged {
            let at = (*page as u64 + 1) * 4096 - 1;
            f.seek(SeekFrom::Start(at)).unwrap();
            f.write_all(&[file[at as usize] ^ 0x5a]).unwrap();
        }
        f.sync_all().unwrap();
    }
    let affected: std::collections::HashSet<usize> = damaged
        .iter()
        .flat_map(|(_, keys)| keys.iter().copied())
        .collect();
    // The compactor's first 20 page reads fail with EIO as well.
    assert_eq!(
        raw.call(&["DEBUG", "TIERED-FAIL", "0", "0", "20"]),
        b"+OK\r\n"
    );
    assert_eq!(raw.call(&["DEBUG", "TIERED-COMPACT", "1"]), b"+OK\r\n");
    wait_until(
        Duration::from_secs(120),
        "the injected and the damaged pages' read errors",
        || {
            raw.info_u64("tiered", "tiered_compaction_read_errors") >= 21
                && raw.info_u64("tiered", "tiered_compaction_damaged_pages") >= 1
        },
    );
    wait_until(
        Duration::from_secs(120),
        "space amplification ≤ 2, no move in flight",
        || {
            amplification(&mut raw) <= 2.0
                && raw.info_u64("tiered", "tiered_compaction_moves_pending") == 0
        },
    );
    // Compaction went on past the failures.
    assert!(raw.info_u64("tiered", "tiered_compaction_moved_records") > 100);
    assert!(server_log(&dir).contains("the compactor's read of page"));
    // Every key: exact, or (one with a record in a damaged page) the read error naming it.
    let mut failed = 0;
    for (i, w) in want.iter().enumerate() {
        let k = format!("k{i}");
        let r = raw.call(&["GET", &k]);
        match w {
            Some(v) if r == bulk(v) => {}
            Some(_) if affected.contains(&i) => {
                let text = String::from_utf8_lossy(&r).into_owned();
                assert!(
                    text.starts_with(&format!("-ERR tiered read of key '{k}' failed: "))
                        && text.contains("checksum mismatch"),
                    "{k}: {text}"
                );
                failed += 1;
            }
            Some(_) => panic!("{k} differs: {}", show(&r)),
            None => assert_eq!(r, b"$-1\r\n", "{k} should be gone"),
        }
    }
    assert!(failed >= 1, "no key of a damaged page failed to read");
    assert!(failed <= damaged.len(), "{failed} keys failed");
    assert_eq!(raw.info_u64("tiered", "tiered_sync_read_errors"), 0);
    // The server goes on: new writes, and the failed keys still exist (cold, unreadable).
    assert_eq!(raw.call(&["SET", "fresh", "v"]), b"+OK\r\n");
    assert_eq!(raw.call(&["GET", "fresh"]), b"$1\r\nv\r\n");
    assert_eq!(raw.call(&["PING"]), b"+PONG\r\n");
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}
