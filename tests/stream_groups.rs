//! Stream consumer groups against redis-server 7.0: scripted commands byte for byte (idle
//! and delivery times masked where they depend on the clock), blocking XREADGROUP,
//! restarts through the log and through SAVE, RDB both ways, DUMP/RESTORE both ways, and
//! hostile payloads.

mod common;
use common::*;
use std::time::Duration;

/// Replaces what depends on the clock in a reply: the idle / delivery-time integer of
/// XPENDING rows (`*4` id name TIME count) and XINFO STREAM FULL's consumer PEL rows
/// (`*3` id TIME count), and the integer after `idle` or `seen-time`.
fn mask(reply: &[u8]) -> String {
    let text = show(reply);
    let mut lines: Vec<String> = text.split("\r\n").map(String::from).collect();
    let int = |l: &String| l.starts_with(':');
    for i in 0..lines.len() {
        if lines[i] == "*4"
            && i + 6 < lines.len()
            && lines[i + 1].starts_with('$')
            && lines[i + 3].starts_with('$')
            && int(&lines[i + 5])
            && int(&lines[i + 6])
        {
            lines[i + 5] = ":T".into();
        }
        if lines[i] == "*3"
            && i + 4 < lines.len()
            && lines[i + 1].starts_with('$')
            && int(&lines[i + 3])
            && int(&lines[i + 4])
        {
            lines[i + 3] = ":T".into();
        }
        if (lines[i] == "idle" || lines[i] == "seen-time") && i + 1 < lines.len() {
            lines[i + 1] = ":T".into();
        }
    }
    lines.join("\r\n")
}

/// Each line on both servers (arguments split at spaces): the same masked replies.
fn run_masked(rc: &mut Raw, rr: &mut Raw, script: &[&str]) {
    for line in script {
        let args: Vec<&str> = line.split(' ').collect();
        let a = mask(&rc.call(&args));
        let b = mask(&rr.call(&args));
        assert_eq!(a, b, "command {line}");
    }
}

const GROUP_SCRIPT: &[&str] = &[
    "XADD s 1-1 a 1",
    "XADD s 2-1 b 2 c 3",
    "XADD s 3-1 a 4",
    "XADD s 4-1 a 5",
    "XADD s 5-1 d 6",
    "XGROUP CREATE s g 0",
    "XGROUP CREATE s g 0",
    "XGROUP CREATE s g2 $",
    "XGROUP CREATE s g3 2-1 ENTRIESREAD 2",
    "XGROUP CREATE s g4 0 ENTRIESREAD -2",
    "XGROUP CREATE s g4 0 ENTRIESREAD x",
    "XGROUP CREATE s g4 0 FOO",
    "XGROUP CREATE s g4 $ MKSTREAM ENTRIESREAD 1 EXTRA",
    "XGROUP CREATE nokey g 0",
    "XGROUP CREATE nokey g $ MKSTREAM",
    "XGROUP CREATE nokey2 g 1-1 MKSTREAM",
    "XGROUP CREATE s g5 bad",
    "XGROUP CREATECONSUMER s g alice",
    "XGROUP CREATECONSUMER s g alice",
    "XGROUP CREATECONSUMER s nog alice",
    "XGROUP CREATECONSUMER nokey3 g alice",
    "XGROUP FOO s g",
    "XGROUP CREATE s",
    "XGROUP HELP",
    "XGROUP HELP x",
    "XGROUP",
    "XREADGROUP GROUP g bob COUNT 2 STREAMS s >",
    "XREADGROUP GROUP g bob STREAMS s 0",
    "XREADGROUP GROUP g bob STREAMS s 1-1",
    "XREADGROUP GROUP g bob COUNT 1 STREAMS s 0",
    "XREADGROUP GROUP g alice STREAMS s >",
    "XREADGROUP GROUP g alice STREAMS s >",
    "XREADGROUP GROUP g alice STREAMS s",
    "XREADGROUP GROUP g alice STREAMS s s > >",
    "XREADGROUP GROUP g alice STREAMS s $",
    "XREADGROUP GROUP nog alice STREAMS s >",
    "XREADGROUP GROUP g alice STREAMS nokey9 >",
    "XREADGROUP COUNT 1 STREAMS s >",
    "XREADGROUP GROUP g alice BLOCK -1 STREAMS s >",
    "XREADGROUP GROUP g alice FOO STREAMS s >",
    "XREADGROUP GROUP g alice STREAMS s bad",
    "XREADGROUP GROUP g2 carol NOACK STREAMS s >",
    "XREAD GROUP g c STREAMS s >",
    "XINFO GROUPS s",
    "XINFO CONSUMERS s g",
    "XINFO CONSUMERS s nog",
    "XINFO GROUPS nokey9",
    "XINFO HELP",
    "XINFO STREAM s",
    "XINFO STREAM s FULL",
    "XINFO STREAM s FULL COUNT 1",
    "XPENDING s g",
    "XPENDING s g - + 10",
    "XPENDING s g - + 10 bob",
    "XPENDING s g - + 10 nobody",
    "XPENDING s g (1-1 + 10",
    "XPENDING s g - (3-1 10",
    "XPENDING s g - + 0",
    "XPENDING s g - + -1",
    "XPENDING s g IDLE 0 - + 10",
    "XPENDING s g IDLE 10000000 - + 10",
    "XPENDING s g IDLE x - + 10",
    "XPENDING s g IDLE 1 - +",
    "XPENDING s g - +",
    "XPENDING s g - + x",
    "XPENDING s g (18446744073709551615-18446744073709551615 + 10",
    "XPENDING s g - (0-0 10",
    "XPENDING s nog",
    "XPENDING nokey9 g",
    "XACK s g 1-1 9-9",
    "XACK s g bad",
    "XACK s nog 1-1",
    "XACK nokey9 g 1-1",
    "XPENDING s g",
    "XCLAIM s g carol 0 2-1 3-1 JUSTID",
    "XCLAIM s g carol 0 2-1",
    "XCLAIM s g carol 10000000 2-1",
    "XCLAIM s g dave 0 4-1 RETRYCOUNT 7 IDLE 5000000",
    "XPENDING s g IDLE 4000000 - + 10",
    "XCLAIM s g dave 0 1-1 9-9 JUSTID",
    "XCLAIM s g dave 0 1-1 FORCE",
    "XCLAIM s g erin 0 5-1 FORCE JUSTID",
    "XCLAIM s g erin 0 9-9 FORCE",
    "XCLAIM s g dave 0 5-1 LASTID 7-0 JUSTID",
    "XCLAIM s g dave 0 LASTID 8-0",
    "XCLAIM s g dave abc 1-1",
    "XCLAIM s g dave 0 1-1 IDLE x",
    "XCLAIM s g dave 0 1-1 TIME x",
    "XCLAIM s g dave 0 1-1 RETRYCOUNT x",
    "XCLAIM s g dave 0 1-1 LASTID bad",
    "XCLAIM s g dave 0 1-1 BAR",
    "XCLAIM s nog dave 0 1-1",
    "XINFO GROUPS s",
    "XPENDING s g - + 10",
    "XAUTOCLAIM s g frank 0 0 COUNT 1",
    "XAUTOCLAIM s g frank 0 0 COUNT 2 JUSTID",
    "XDEL s 2-1",
    "XAUTOCLAIM s g frank 0 0",
    "XAUTOCLAIM s g frank 0 (1-1 COUNT 1",
    "XAUTOCLAIM s g frank 10000000 0",
    "XAUTOCLAIM s g frank 0 0 COUNT 0",
    "XAUTOCLAIM s g frank 0 0 COUNT x",
    "XAUTOCLAIM s g frank 0 0 FOO",
    "XAUTOCLAIM s g frank x 0",
    "XAUTOCLAIM s g frank 0 bad",
    "XAUTOCLAIM s nog frank 0 0",
    "XPENDING s g",
    "XINFO CONSUMERS s g",
    "XINFO GROUPS s",
    "XGROUP SETID s g 1-1",
    "XINFO GROUPS s",
    "XGROUP SETID s g $ ENTRIESREAD 4",
    "XGROUP SETID s g - ENTRIESREAD 0",
    "XGROUP SETID s g bad",
    "XGROUP SETID s nog 0",
    "XGROUP SETID s g 0 MKSTREAM",
    "XINFO GROUPS s",
    "XREADGROUP GROUP g gina STREAMS s >",
    "XGROUP DELCONSUMER s g frank",
    "XGROUP DELCONSUMER s g frank",
    "XGROUP DELCONSUMER s nog frank",
    "XINFO CONSUMERS s g",
    "XPENDING s g",
    "XADD s 6-1 z 1",
    "XTRIM s MAXLEN 2",
    "XINFO GROUPS s",
    "XSETID s 10-1",
    "XINFO GROUPS s",
    "XINFO STREAM s FULL",
    "XGROUP DESTROY s g",
    "XGROUP DESTROY s g",
    "XGROUP DESTROY nokey9 g",
    "XINFO STREAM s",
    "SET str v",
    "XGROUP CREATE str g 0",
    "XREADGROUP GROUP g c STREAMS str >",
    "XACK str g 1-1",
    "XPENDING str g",
    "XCLAIM str g c 0 1-1",
    "XAUTOCLAIM str g c 0 0",
    "XINFO GROUPS str",
    "MULTI",
    "XREADGROUP GROUP g3 h BLOCK 0 STREAMS s >",
    "XREADGROUP GROUP g3 h BLOCK 0 STREAMS s >",
    "EXEC",
    "DEL s",
    "XGROUP CREATE e g $ MKSTREAM",
    "XINFO GROUPS e",
    "XADD e 1-1 a 1",
    "XINFO GROUPS e",
    "XDEL e 1-1",
    "XINFO GROUPS e",
    "XREADGROUP GROUP g c STREAMS e >",
];

#[test]
fn scripted_group_commands_match_redis() {
    let (_c, _r, mut rc, mut rr) = both(&["--stream-node-max-entries", "2"]);
    run_masked(&mut rc, &mut rr, GROUP_SCRIPT);
    // RESP3 replies (maps).
    rc.call(&["HELLO", "3"]);
    rr.call(&["HELLO", "3"]);
    run_masked(
        &mut rc,
        &mut rr,
        &[
            "XADD r 1-1 a 1",
            "XGROUP CREATE r g 0",
            "XREADGROUP GROUP g c STREAMS r >",
            "XINFO GROUPS r",
            "XINFO CONSUMERS r g",
            "XINFO STREAM r FULL",
        ],
    );
}

#[test]
fn xreadgroup_blocks_and_wakes_like_redis() {
    let (c, r, mut rc, mut rr) = both(&[]);
    let mut wc = Raw::connect(c.port);
    let mut wr = Raw::connect(r.port);
    let id = show(&wc.call(&["CLIENT", "ID"]))
        .trim_start_matches(':')
        .trim()
        .to_string();
    for w in [&mut rc, &mut rr] {
        w.call(&["XADD", "s", "1-1", "a", "1"]);
        w.call(&["XGROUP", "CREATE", "s", "g", "$"]);
    }
    let block = |w: &mut Raw, args: &[&str]| {
        let a: Vec<&[u8]> = args.iter().map(|x| x.as_bytes()).collect();
        w.cmd(&a);
    };
    let wait_blocked = |r: &mut Raw| {
        wait_until(Duration::from_secs(10), "the reader blocks", || {
            r.info_u64("clients", "blocked_clients") == 1
        });
    };
    // Served by an XADD, twice (the second waiter after the first moved the group on).
    for (w, r) in [(&mut wc, &mut rc), (&mut wr, &mut rr)] {
        block(
            w,
            &[
                "XREADGROUP",
                "GROUP",
                "g",
                "c1",
                "BLOCK",
                "0",
                "STREAMS",
                "s",
                ">",
            ],
        );
        wait_blocked(r);
        r.call(&["XADD", "s", "2-1", "b", "2"]);
    }
    assert_eq!(show(&wc.reply()), show(&wr.reply()));
    run_masked(&mut rc, &mut rr, &["XPENDING s g - + 10", "XINFO GROUPS s"]);
    // Timed out.
    for w in [&mut wc, &mut wr] {
        block(
            w,
            &[
                "XREADGROUP",
                "GROUP",
                "g",
                "c1",
                "BLOCK",
                "30",
                "STREAMS",
                "s",
                ">",
            ],
        );
    }
    assert_eq!(show(&wc.reply()), show(&wr.reply()));
    // NOACK, served by an XADD inside MULTI with more than the default count.
    for (w, r) in [(&mut wc, &mut rc), (&mut wr, &mut rr)] {
        block(
            w,
            &[
                "XREADGROUP",
                "GROUP",
                "g",
                "c2",
                "NOACK",
                "BLOCK",
                "0",
                "STREAMS",
                "s",
                ">",
            ],
        );
        wait_blocked(r);
        r.call(&["MULTI"]);
        for i in 0..12 {
            r.call(&["XADD", "s", &format!("{}-0", 10 + i), "n", &i.to_string()]);
        }
        r.call(&["EXEC"]);
    }
    assert_eq!(show(&wc.reply()), show(&wr.reply()));
    run_masked(&mut rc, &mut rr, &["XINFO GROUPS s", "XINFO CONSUMERS s g"]);
    // The group destroyed while waiting.
    for (w, r) in [(&mut wc, &mut rc), (&mut wr, &mut rr)] {
        block(
            w,
            &[
                "XREADGROUP",
                "GROUP",
                "g",
                "c1",
                "BLOCK",
                "0",
                "STREAMS",
                "s",
                ">",
            ],
        );
        wait_blocked(r);
        r.call(&["XGROUP", "DESTROY", "s", "g"]);
    }
    let got = show(&wc.reply());
    assert_eq!(
        got,
        "-NOGROUP the consumer group this client was blocked on no longer exists\r\n"
    );
    assert_eq!(got, show(&wr.reply()));
    // The key deleted, then overwritten by another type.
    for cmd in [
        vec!["DEL", "s"],
        vec!["SET", "s", "x"],
        vec!["FLUSHDB"],
        vec!["FLUSHALL"],
        vec!["RENAME", "s", "s2"],
    ] {
        for (w, r) in [(&mut wc, &mut rc), (&mut wr, &mut rr)] {
            r.call(&["DEL", "s"]);
            r.call(&["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
            block(
                w,
                &[
                    "XREADGROUP",
                    "GROUP",
                    "g",
                    "c1",
                    "BLOCK",
                    "0",
                    "STREAMS",
                    "s",
                    ">",
                ],
            );
            wait_blocked(r);
            r.call(&cmd);
        }
        let got = show(&wc.reply());
        assert_eq!(got, "-UNBLOCKED the stream key no longer exists\r\n");
        assert_eq!(got, show(&wr.reply()));
    }
    // An XADD that a waiter on another group's stream does not see keeps it waiting;
    // CLIENT UNBLOCK answers it.
    rc.call(&["DEL", "s"]);
    rc.call(&["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
    rc.call(&["XGROUP", "CREATE", "o", "g", "$", "MKSTREAM"]);
    block(
        &mut wc,
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "c1",
            "BLOCK",
            "0",
            "STREAMS",
            "s",
            ">",
        ],
    );
    wait_blocked(&mut rc);
    rc.call(&["XADD", "o", "5-5", "x", "y"]);
    rc.call(&["XDEL", "s", "1-1"]);
    assert_eq!(rc.info_u64("clients", "blocked_clients"), 1);
    assert_eq!(rc.call(&["CLIENT", "UNBLOCK", &id]), b":1\r\n");
    assert_eq!(wc.reply(), b"*-1\r\n");
}

/// A stream with two groups, pending entries of several consumers, a NOACK group, a
/// deleted entry and consumers without pending entries.
fn fill_groups(c: &mut Raw) {
    for i in 1..=8 {
        c.call(&["XADD", "s", &format!("{i}-0"), "f", &"v".repeat(i)]);
    }
    c.call(&["XGROUP", "CREATE", "s", "g", "0"]);
    c.call(&["XGROUP", "CREATE", "s", "n", "0"]);
    c.call(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "alice",
        "COUNT",
        "3",
        "STREAMS",
        "s",
        ">",
    ]);
    c.call(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "bob",
        "COUNT",
        "2",
        "STREAMS",
        "s",
        ">",
    ]);
    c.call(&[
        "XREADGROUP",
        "GROUP",
        "n",
        "zed",
        "NOACK",
        "COUNT",
        "5",
        "STREAMS",
        "s",
        ">",
    ]);
    c.call(&[
        "XCLAIM",
        "s",
        "g",
        "carol",
        "0",
        "2-0",
        "IDLE",
        "500000",
        "RETRYCOUNT",
        "4",
    ]);
    c.call(&["XCLAIM", "s", "g", "carol", "0", "8-0", "FORCE", "JUSTID"]);
    c.call(&["XACK", "s", "g", "4-0"]);
    c.call(&["XDEL", "s", "3-0"]);
    c.call(&["XGROUP", "CREATECONSUMER", "s", "g", "idle"]);
    c.call(&[
        "XCLAIM", "s", "g", "dave", "0", "1-0", "LASTID", "6-0", "JUSTID",
    ]);
}

#[test]
fn the_log_replays_groups() {
    let dir = temp_dir("groups-aof");
    let want;
    {
        let s = start_on(&dir, &["--appendonly", "yes"], &[]);
        let mut c = Raw::connect(s.port);
        fill_groups(&mut c);
        c.call(&["XAUTOCLAIM", "s", "g", "erin", "0", "0", "COUNT", "1"]);
        // A blocked read served by a later XADD is logged like a direct one.
        let mut waiter = Raw::connect(s.port);
        c.call(&["XGROUP", "CREATE", "s", "w", "$"]);
        waiter.cmd(&[
            b"XREADGROUP",
            b"GROUP",
            b"w",
            b"late",
            b"BLOCK",
            b"0",
            b"STREAMS",
            b"s",
            b">",
        ]);
        wait_until(Duration::from_secs(10), "the reader blocks", || {
            c.info_u64("clients", "blocked_clients") == 1
        });
        c.call(&["XADD", "s", "9-0", "f", "new"]);
        let got = show(&waiter.reply());
        assert!(got.contains("$3\r\n9-0\r\n"), "{got}");
        want = (
            c.call(&["XPENDING", "s", "g", "-", "+", "100"]),
            c.call(&["XINFO", "CONSUMERS", "s", "g"]),
            c.call(&["XINFO", "GROUPS", "s"]),
        );
    }
    let s = start_on(&dir, &["--appendonly", "yes"], &[]);
    let mut c = Raw::connect(s.port);
    assert_eq!(
        mask(&c.call(&["XPENDING", "s", "g", "-", "+", "100"])),
        mask(&want.0)
    );
    assert_eq!(
        mask(&c.call(&["XINFO", "CONSUMERS", "s", "g"])),
        mask(&want.1)
    );
    // Delivery times come back from the log: the entry claimed 500 s idle still is.
    let rows = show(&c.call(&["XPENDING", "s", "g", "IDLE", "400000", "-", "+", "10"]));
    assert!(
        rows.starts_with("*1\r\n*4\r\n$3\r\n2-0\r\n$5\r\ncarol\r\n"),
        "{rows}"
    );
    // Groups as Redis's replay leaves them: g's read counter is not logged by the
    // XCLAIMs that rebuild its PEL (entries-read and lag unknown); n's NOACK reads are
    // logged with theirs.
    let groups = show(&c.call(&["XINFO", "GROUPS", "s"]));
    let before = show(&want.2);
    assert!(groups.contains("$1\r\nn\r\n$9\r\nconsumers\r\n:1\r\n$7\r\npending\r\n:0\r\n$17\r\nlast-delivered-id\r\n$3\r\n5-0\r\n$12\r\nentries-read\r\n:5\r\n"), "{groups}");
    assert!(before.contains("$12\r\nentries-read\r\n:5\r\n"), "{before}");
    assert!(
        groups.contains("$17\r\nlast-delivered-id\r\n$3\r\n6-0\r\n$12\r\nentries-read\r\n_")
            || groups.contains(
                "$17\r\nlast-delivered-id\r\n$3\r\n6-0\r\n$12\r\nentries-read\r\n$-1\r\n"
            ),
        "{groups}"
    );
    // BGREWRITEAOF: the base holds the groups as RDB.
    c.call(&["BGREWRITEAOF"]);
    wait_until(Duration::from_secs(20), "the rewrite ends", || {
        c.info_u64("persistence", "aof_rewrite_in_progress") == 0
            && c.info_u64("persistence", "aof_rewrite_scheduled") == 0
    });
    let full = c.call(&["XINFO", "STREAM", "s", "FULL"]);
    drop(c);
    drop(s);
    let s = start_on(&dir, &["--appendonly", "yes"], &[]);
    let mut c = Raw::connect(s.port);
    assert_eq!(
        show(&c.call(&["XINFO", "STREAM", "s", "FULL"])),
        show(&full)
    );
}

#[test]
fn save_and_restart_keep_groups() {
    let dir = temp_dir("groups-save");
    let want;
    {
        let s = start_on(&dir, &["--stream-node-max-entries", "3"], &[]);
        let mut c = Raw::connect(s.port);
        fill_groups(&mut c);
        c.call(&["COPY", "s", "copy"]);
        want = (
            c.call(&["XINFO", "STREAM", "s", "FULL"]),
            c.call(&["XINFO", "STREAM", "copy", "FULL"]),
        );
        assert_eq!(show(&want.0), show(&want.1));
        assert_eq!(c.call(&["SAVE"]), b"+OK\r\n");
    }
    let s = start_on(&dir, &["--stream-node-max-entries", "3"], &[]);
    let mut c = Raw::connect(s.port);
    assert_eq!(
        show(&c.call(&["XINFO", "STREAM", "s", "FULL"])),
        show(&want.0)
    );
    assert_eq!(
        show(&c.call(&["XINFO", "STREAM", "copy", "FULL"])),
        show(&want.1)
    );
    // The restored groups work on.
    assert_eq!(c.call(&["XACK", "s", "g", "1-0", "2-0", "5-0"]), b":3\r\n");
    c.call(&["XGROUP", "DESTROY", "copy", "g"]);
    assert_eq!(c.call(&["DEL", "copy"]), b":1\r\n");
}

#[test]
fn rdb_both_ways_and_dump_restore_with_redis() {
    // cairn's image exported as RDB, loaded by redis-server (deep sanitization on).
    let dir = temp_dir("groups-export");
    let want;
    {
        let s = start_on(&dir, &[], &[]);
        let mut c = Raw::connect(s.port);
        fill_groups(&mut c);
        want = c.call(&["XINFO", "STREAM", "s", "FULL"]);
        assert_eq!(c.call(&["SAVE"]), b"+OK\r\n");
    }
    let rdir = temp_dir("groups-export-redis");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cairn-server"))
        .arg("--export-rdb")
        .arg(dir.join("dump.cimg"))
        .arg(rdir.join("dump.rdb"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", show(&out.stderr));
    let r = start_redis(&[
        "--dir",
        rdir.to_str().unwrap(),
        "--sanitize-dump-payload",
        "yes",
    ]);
    let mut rr = Raw::connect(r.port);
    assert_eq!(
        show(&rr.call(&["XINFO", "STREAM", "s", "FULL"])),
        show(&want)
    );
    // A Redis dump.rdb with groups, loaded by cairn.
    assert_eq!(rr.call(&["SAVE"]), b"+OK\r\n");
    let cdir = temp_dir("groups-from-redis");
    std::fs::copy(rdir.join("dump.rdb"), cdir.join("dump.rdb")).unwrap();
    let s = start_on(&cdir, &[], &[]);
    let mut rc = Raw::connect(s.port);
    run_script(&mut rc, &mut rr, &["XINFO STREAM s FULL", "XINFO GROUPS s"]);
    // DUMP / RESTORE both ways.
    let from_cairn = bulk_payload(&rc.call(&["DUMP", "s"]));
    let from_redis = bulk_payload(&rr.call(&["DUMP", "s"]));
    for (raw, payload) in [(&mut rr, &from_cairn), (&mut rc, &from_redis)] {
        raw.cmd(&[b"RESTORE", b"copy", b"0", payload]);
        assert_eq!(raw.reply(), b"+OK\r\n");
    }
    run_masked(
        &mut rc,
        &mut rr,
        &[
            "XINFO STREAM copy FULL",
            "XPENDING copy g - + 100",
            "XACK copy g 1-0 5-0",
            "XAUTOCLAIM copy g new 0 0 JUSTID",
            "XREADGROUP GROUP g alice STREAMS copy 0",
            "XINFO CONSUMERS copy g",
        ],
    );
}

/// Rewrites a DUMP payload's CRC-64 over its body and version.
fn fix_crc(mut p: Vec<u8>) -> Vec<u8> {
    let n = p.len() - 8;
    let crc = cairn::persistence::rdb_value::crc64(&p[..n]);
    p[n..].copy_from_slice(&crc.to_le_bytes());
    p
}

/// A type-19 payload of an empty stream (last ID 5-0) with the given groups section.
fn empty_with_groups(groups: &[u8]) -> Vec<u8> {
    // Type, no nodes, length 0, last ID 5-0, first ID, max deleted ID, entries added.
    let mut p = vec![19u8, 0, 0, 5, 0, 0, 0, 0, 0, 0];
    p.extend_from_slice(groups);
    p.extend_from_slice(&[10, 0]);
    p.extend_from_slice(&[0u8; 8]);
    fix_crc(p)
}

fn raw_id(ms: u8) -> Vec<u8> {
    let mut v = vec![0u8; 16];
    v[7] = ms;
    v
}

#[test]
fn hostile_group_payloads_are_refused() {
    let c = start_cairn(&[]);
    let mut rc = Raw::connect(c.port);
    fill_groups(&mut rc);
    let good = bulk_payload(&rc.call(&["DUMP", "s"]));
    let body_len = good.len() - 10;
    // Every truncation, and changed bytes everywhere: an error or a stream that works.
    for cut in 0..body_len {
        let mut p = good[..cut].to_vec();
        p.extend_from_slice(&good[body_len..]);
        rc.cmd(&[b"RESTORE", b"t", b"0", &fix_crc(p), b"REPLACE"]);
        assert_eq!(
            show(&rc.reply()),
            "-ERR Bad data format\r\n",
            "cut at {cut}"
        );
    }
    for at in 0..body_len {
        for delta in [1u8, 0x80, 0xff] {
            let mut p = good.clone();
            p[at] = p[at].wrapping_add(delta);
            rc.cmd(&[b"RESTORE", b"t", b"0", &fix_crc(p), b"REPLACE"]);
            let r = show(&rc.reply());
            assert!(
                r == "+OK\r\n" || r.starts_with("-ERR Bad data format"),
                "{at}: {r}"
            );
            if r == "+OK\r\n" {
                rc.call(&["XINFO", "STREAM", "t", "FULL"]);
                rc.call(&["XPENDING", "t", "g", "-", "+", "100"]);
                rc.call(&["XAUTOCLAIM", "t", "g", "x", "0", "0"]);
                rc.call(&["XREADGROUP", "GROUP", "g", "y", "STREAMS", "t", ">"]);
                rc.call(&["XGROUP", "DESTROY", "t", "g"]);
            }
        }
    }
    // Crafted groups sections: a group with one PEL entry (1-0) and a consumer.
    let group = |pel: &[Vec<u8>], consumers: &[(&str, Vec<Vec<u8>>)]| -> Vec<u8> {
        let mut g = vec![1u8, 1, b'g', 0, 0, 0];
        g.push(pel.len() as u8);
        for id in pel {
            g.extend_from_slice(id);
            g.extend_from_slice(&[0u8; 8]);
            g.push(1);
        }
        g.push(consumers.len() as u8);
        for (name, ids) in consumers {
            g.push(name.len() as u8);
            g.extend_from_slice(name.as_bytes());
            g.extend_from_slice(&[0u8; 8]);
            g.push(ids.len() as u8);
            for id in ids {
                g.extend_from_slice(id);
            }
        }
        g
    };
    let ok = empty_with_groups(&group(&[raw_id(1)], &[("c", vec![raw_id(1)])]));
    rc.cmd(&[b"RESTORE", b"ok", b"0", &ok]);
    assert_eq!(rc.reply(), b"+OK\r\n");
    assert_eq!(
        show(&rc.call(&["XPENDING", "ok", "g"])),
        "*4\r\n:1\r\n$3\r\n1-0\r\n$3\r\n1-0\r\n*1\r\n*2\r\n$1\r\nc\r\n$1\r\n1\r\n"
    );
    let bad = [
        // A consumer naming an ID the group PEL does not have.
        group(&[raw_id(1)], &[("c", vec![raw_id(2)])]),
        // A PEL entry no consumer owns.
        group(&[raw_id(1)], &[("c", vec![])]),
        // An entry owned twice.
        group(
            &[raw_id(1)],
            &[("c", vec![raw_id(1)]), ("d", vec![raw_id(1)])],
        ),
        // The same ID twice in the group PEL.
        group(&[raw_id(1), raw_id(1)], &[("c", vec![raw_id(1)])]),
        // Two consumers with one name.
        group(&[raw_id(1)], &[("c", vec![raw_id(1)]), ("c", vec![])]),
    ];
    for (i, g) in bad.iter().enumerate() {
        rc.cmd(&[b"RESTORE", b"bad", b"0", &empty_with_groups(g)]);
        assert_eq!(show(&rc.reply()), "-ERR Bad data format\r\n", "case {i}");
    }
    // Two groups with one name; huge declared counts.
    let mut twice = vec![2u8];
    twice.extend_from_slice(&group(&[], &[])[1..]);
    twice.extend_from_slice(&group(&[], &[])[1..]);
    let huge_groups = [0x80u8, 0x7f, 0xff, 0xff, 0xff];
    let mut huge_pel = vec![1u8, 1, b'g', 0, 0, 0];
    huge_pel.extend_from_slice(&[0x80, 0x7f, 0xff, 0xff, 0xff]);
    let mut huge_consumers = vec![1u8, 1, b'g', 0, 0, 0, 0];
    huge_consumers.extend_from_slice(&[0x80, 0x7f, 0xff, 0xff, 0xff]);
    for (i, g) in [twice, huge_groups.to_vec(), huge_pel, huge_consumers]
        .iter()
        .enumerate()
    {
        rc.cmd(&[b"RESTORE", b"bad", b"0", &empty_with_groups(g)]);
        assert_eq!(show(&rc.reply()), "-ERR Bad data format\r\n", "case {i}");
    }
    assert_eq!(rc.call(&["PING"]), b"+PONG\r\n");
}

#[test]
fn big_pending_lists_are_copied_and_freed_lazily() {
    let c = start_cairn(&[]);
    let mut rc = Raw::connect(c.port);
    let before = used_memory(&mut rc);
    let mut pipeline = Vec::new();
    for i in 1..=3000 {
        pipeline.extend(encode(&[
            b"XADD",
            b"s",
            format!("{i}-0").as_bytes(),
            b"f",
            b"v",
        ]));
    }
    rc.send(&pipeline);
    for _ in 0..3000 {
        rc.reply();
    }
    rc.call(&["XGROUP", "CREATE", "s", "g", "0"]);
    rc.call(&["XGROUP", "CREATE", "s", "h", "0"]);
    for (g, c) in [("g", "a"), ("g", "b"), ("h", "a")] {
        rc.call(&[
            "XREADGROUP",
            "GROUP",
            g,
            c,
            "COUNT",
            "1500",
            "STREAMS",
            "s",
            ">",
        ]);
    }
    assert_eq!(rc.call(&["COPY", "s", "t"]), b":1\r\n");
    assert_eq!(
        show(&rc.call(&["XPENDING", "t", "g"])),
        show(&rc.call(&["XPENDING", "s", "g"]))
    );
    let usage = show(&rc.call(&["MEMORY", "USAGE", "s"]));
    let usage: u64 = usage.trim_start_matches(':').trim().parse().unwrap();
    // 4500 pending entries of at least 48 bytes each.
    assert!(usage > 4500 * 48, "{usage}");
    assert_eq!(rc.call(&["DEL", "s", "t"]), b":2\r\n");
    wait_memory_back(&mut rc, before);
}
