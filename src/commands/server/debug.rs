//! DEBUG (gated by `enable-debug-command`): OBJECT, DIGEST / DIGEST-VALUE, RELOAD and the
//! test helpers Redis's suite uses.

use super::*;

pub(super) fn debug(ctx: &mut Ctx) -> CmdResult {
    let argc = ctx.args.len();
    let sub = ctx.args.str(1).to_ascii_lowercase();
    match (sub.as_str(), argc) {
        ("help", 2) => debug_help(ctx),
        ("sleep", 3) => {
            // Redis parses with strtod: garbage means 0 seconds, a negative time no sleep.
            let secs = crate::util::parse_f64(ctx.args.get(2)).unwrap_or(0.0);
            // Bounded (Redis is not): a typo must not freeze the server for days.
            let secs = secs.min(DEBUG_SLEEP_MAX_SECS);
            if let Ok(d) = std::time::Duration::try_from_secs_f64(secs) {
                std::thread::sleep(d);
            }
            ctx.out.ok();
            Ok(())
        }
        ("reload", _) => super::debug_reload::reload(ctx),
        ("loadaof", 2) => super::debug_reload::loadaof(ctx),
        ("protocol", 3) => protocol(ctx),
        ("quicklist-packed-threshold", 3) => {
            let Some(bytes) = crate::config::parse_memory(&ctx.args.str(2))
                .filter(|&n| n >= 0 && n as u64 <= (1u64 << 32) - (1 << 20))
            else {
                return Err(CmdError::err(
                    "argument must be a memory value bigger than 1 and smaller than 4gb",
                ));
            };
            // 0 restores the default. cairn keeps every element packed in listpack
            // nodes (it has no plain nodes), which is the default's behaviour for every
            // element a client can send; another threshold cannot be honoured.
            if bytes != 0 {
                return Err(CmdError::err(
                    "cairn stores every list element in listpack nodes (no plain nodes): only 0 (the default) is accepted",
                ));
            }
            ctx.out.ok();
            Ok(())
        }
        ("listpack", 3) => {
            let db = ctx.db();
            let Some(e) = ctx.srv.ks.lookup_read(db, ctx.args.get(2), ctx.now_ms) else {
                return Err(CmdError::NoSuchKey);
            };
            let Some(lp) = listpack_of(&ctx.srv.ks, e) else {
                return Err(CmdError::err("Not a listpack encoded object."));
            };
            print_listpack(lp);
            ctx.out.simple("Listpack structure printed on stdout");
            Ok(())
        }
        ("quicklist", 3 | 4) => {
            let db = ctx.db();
            let Some(e) = ctx.srv.ks.lookup_read(db, ctx.args.get(2), ctx.now_ms) else {
                return Err(CmdError::NoSuchKey);
            };
            // As Redis (atoi): anything but a number is 0.
            let full = argc == 4 && crate::util::parse_i64(ctx.args.get(3)).unwrap_or(0) != 0;
            if ctx.srv.ks.kind(e) != Kind::List {
                return Err(CmdError::err("Not a quicklist encoded object."));
            }
            print_quicklist(&ctx.srv.ks, e, full);
            ctx.out.simple("Quicklist structure printed on stdout");
            Ok(())
        }
        ("stringmatch-test", 2) => {
            stringmatch_fuzz();
            ctx.out
                .simple("Apparently Redis did not crash: test passed");
            Ok(())
        }
        ("change-repl-id", 2) => {
            crate::warning!("Changing replication IDs after receiving DEBUG change-repl-id");
            change_replication_id(ctx.srv);
            ctx.out.ok();
            Ok(())
        }
        ("replybuffer", 4) => {
            // Redis's reply buffers grow and shrink on a cron; cairn's output is a queue
            // of owned chunks without that resizing, so there is nothing to tune.
            if ctx.args.is(2, "peak-reset-time") {
                if !ctx.args.is(3, "never") && !ctx.args.is(3, "reset") {
                    ctx.args.i64(3)?;
                }
            } else if !ctx.args.is(2, "resizing") {
                return Err(CmdError::err(format!(
                    "unknown subcommand or wrong number of arguments for '{}'. Try DEBUG HELP.",
                    ctx.args.str(1)
                )));
            }
            Err(CmdError::err(
                "cairn's reply buffers are not resized by a cron: REPLYBUFFER has nothing to set",
            ))
        }
        ("digest", 2) => {
            let d = if ctx.srv.ks.tier.cold_entries > 0 {
                dataset_digest_reading_cold(&mut ctx.srv.ks).map_err(CmdError::err)?
            } else {
                dataset_digest(&ctx.srv.ks)
            };
            ctx.out.simple(&hex(&d));
            Ok(())
        }
        ("digest-value", _) => {
            let db = ctx.db();
            let mut scratch = None;
            let mut digests = Vec::with_capacity(argc - 2);
            for i in 2..argc {
                let mut d = [0u8; 20];
                if let Some(e) = ctx.srv.ks.find_raw(db, ctx.args.get(i)) {
                    if ctx.srv.ks.is_cold(e) {
                        cold_object_digest(&mut ctx.srv.ks, e, &mut scratch, &mut d)
                            .map_err(CmdError::err)?;
                    } else {
                        xor_object_digest(&ctx.srv.ks, e, &mut d);
                    }
                }
                digests.push(d);
            }
            ctx.out.array(digests.len());
            for d in &digests {
                ctx.out.simple(&hex(d));
            }
            Ok(())
        }
        ("object", 3) => {
            let db = ctx.db();
            let Some(e) = ctx.srv.ks.find_raw(db, ctx.args.get(2)) else {
                return Err(CmdError::NoSuchKey);
            };
            let fill = ctx
                .srv
                .config
                .get_value("list-max-listpack-size")
                .and_then(|v| v.parse::<i64>().ok())
                .unwrap_or(-2);
            let mut line = debug_object_line(&ctx.srv.ks, e, fill);
            // With tiering on: where the value lives (the gate brought a cold one back).
            if let Some(state) = ctx.srv.tiering_state_of(db, ctx.args.get(2)) {
                if ctx.srv.tiering.is_some() {
                    line.push_str(" tier:");
                    line.push_str(state);
                }
            }
            ctx.out.simple(&line);
            Ok(())
        }
        ("tiered-hold-reads", 3) => {
            // cairn's own (tests): 1 holds tier reads not yet submitted, 0 lets them go,
            // so a test can see clients wait without depending on timing.
            let hold = crate::util::parse_i64(ctx.args.get(2)).unwrap_or(0) != 0;
            let t = tier_state(ctx)?;
            t.store.hold_reads(hold);
            ctx.out.ok();
            Ok(())
        }
        ("tiered-hold-writes", 3) => {
            // cairn's own (tests): 1 holds tier writes in the I/O thread (the pass's and
            // the compactor's), 0 lets them go.
            let hold = crate::util::parse_i64(ctx.args.get(2)).unwrap_or(0) != 0;
            let t = tier_state(ctx)?;
            t.store.hold_writes(hold);
            ctx.out.ok();
            Ok(())
        }
        ("tiered-write-delay", 3) => {
            // cairn's own (tests): the tier thread sleeps this many microseconds before
            // each write (0: none), as a slow device would.
            let us = ctx.args.i64(2)?.clamp(0, 1_000_000) as u64;
            let t = tier_state(ctx)?;
            t.store.set_write_delay(us);
            ctx.out.ok();
            Ok(())
        }
        ("tiered-compact", 3) => {
            // cairn's own (tests): 0 starts no more compaction reads, 1 lets them start
            // again (those in flight finish either way).
            let on = crate::util::parse_i64(ctx.args.get(2)).unwrap_or(1) != 0;
            let t = tier_state(ctx)?;
            t.compact_paused = !on;
            ctx.out.ok();
            Ok(())
        }
        ("tiered-fail", 4 | 5) => {
            // cairn's own (tests): the next N tier reads fail with EIO, the next M
            // writes with ENOSPC and the compactor's next P page reads with EIO
            // (`DEBUG TIERED-FAIL N M [P]`).
            let reads = ctx.args.i64(2)?.clamp(0, u32::MAX as i64) as u32;
            let writes = ctx.args.i64(3)?.clamp(0, u32::MAX as i64) as u32;
            let page_reads = if ctx.args.len() == 5 {
                ctx.args.i64(4)?.clamp(0, u32::MAX as i64) as u32
            } else {
                0
            };
            let t = tier_state(ctx)?;
            t.store.inject_failures(reads, writes, page_reads);
            ctx.out.ok();
            Ok(())
        }
        ("tiered-state", 3) => {
            // cairn's own: `hot`, `stashing`, `cooled` or `cold`, without reading the value.
            tier_state(ctx)?;
            let db = ctx.db();
            match ctx.srv.tiering_state_of(db, ctx.args.get(2)) {
                Some(state) => ctx.out.simple(state),
                None => return Err(CmdError::NoSuchKey),
            }
            Ok(())
        }
        ("aof-pause-syncs", 3) => {
            // cairn's own: with 1 the log issues no group fsync (a rotation or shutdown
            // still syncs), so under `appendfsync always` write replies and reads of the
            // keys they touched wait until 0 (tests).
            let paused = crate::util::parse_i64(ctx.args.get(2)).unwrap_or(0) != 0;
            if !ctx.srv.aof.pause_syncs(paused) {
                return Err(CmdError::err("the append only file is not open"));
            }
            ctx.out.ok();
            Ok(())
        }
        ("aof-hold-values", 3) => {
            // cairn's own: with 1 the log's writer thread waits before copying the values
            // of entries logged by reference (and everything queued after them), so tests
            // can change or delete their keys while the log still needs the bytes.
            let held = crate::util::parse_i64(ctx.args.get(2)).unwrap_or(0) != 0;
            if !ctx.srv.aof.hold_values(held) {
                return Err(CmdError::err("the append only file is not open"));
            }
            ctx.out.ok();
            Ok(())
        }
        ("set-active-expire", 3) => {
            // As Redis (atoi): any non-zero number enables it.
            let v = crate::util::parse_i64(ctx.args.get(2)).unwrap_or(0);
            ctx.srv.active_expire_enabled = v != 0;
            ctx.out.ok();
            Ok(())
        }
        _ => Err(CmdError::err(format!(
            "unknown subcommand or wrong number of arguments for '{}'. Try DEBUG HELP.",
            ctx.args.str(1)
        ))),
    }
}

/// DEBUG PROTOCOL double's value (Redis's).
#[allow(clippy::approx_constant)]
const DEBUG_PROTOCOL_DOUBLE: f64 = 3.141;

/// DEBUG SLEEP's longest sleep: longer asks are cut to this.
const DEBUG_SLEEP_MAX_SECS: f64 = 3600.0;

/// DEBUG PROTOCOL <type>: one test value of each RESP type, as Redis 7.0 sends it in
/// RESP2 and RESP3.
fn protocol(ctx: &mut Ctx) -> CmdResult {
    let v3 = ctx.out.resp == crate::protocol::reply::Resp::V3;
    let name = ctx.args.str(2).to_ascii_lowercase();
    let out = &mut ctx.out;
    match name.as_str() {
        "string" => out.bulk(b"Hello World"),
        "integer" => out.int(12345),
        // Redis's test value, not an approximation of pi.
        "double" => out.double(DEBUG_PROTOCOL_DOUBLE),
        "bignum" => {
            let n = "1234567999999999999999999999999999999";
            if v3 {
                out.raw(format!("({n}\r\n").as_bytes());
            } else {
                out.bulk(n.as_bytes());
            }
        }
        "null" => out.null(),
        "array" | "set" => {
            if name == "array" {
                out.array(3);
            } else {
                out.set(3);
            }
            for j in 0..3 {
                out.int(j);
            }
        }
        "map" => {
            out.map(3);
            for j in 0..3 {
                out.int(j);
                out.boolean(j == 1);
            }
        }
        "attrib" => {
            if v3 {
                out.raw(b"|1\r\n");
                out.bulk(b"key-popularity");
                out.array(2);
                out.bulk(b"key:123");
                out.int(90);
            }
            out.bulk(b"Some real reply following the attribute");
        }
        "push" => {
            if !v3 {
                return Err(CmdError::err("RESP2 is not supported by this command"));
            }
            out.push(2);
            out.bulk(b"server-cpu-usage");
            out.int(42);
            out.bulk(b"Some real reply following the push reply");
        }
        "true" => out.boolean(true),
        "false" => out.boolean(false),
        "verbatim" => out.verbatim(b"This is a verbatim\nstring"),
        _ => {
            return Err(CmdError::err(
                "Wrong protocol type name. Please use one of the following: string|integer|double|bignum|null|array|set|map|attrib|push|verbatim|true|false",
            ))
        }
    }
    Ok(())
}

/// The listpack a value is stored in, when its encoding is `listpack`.
fn listpack_of(ks: &Keyspace, e: crate::arena::Ref) -> Option<&[u8]> {
    match ks.kind(e) {
        Kind::Hash => crate::collections::hash::listpack(ks, e),
        Kind::ZSet => crate::collections::zset::listpack(ks, e),
        // A listpack set reports 7.0's `hashtable` (see `keys::encoding_name`), and 7.0
        // refuses DEBUG LISTPACK of one.
        _ => None,
    }
}

/// Prints a listpack's entries on stdout (DEBUG LISTPACK), in the layout of Redis's
/// `lpRepr`: offsets, sizes and the bytes of each entry, its value cut at 40 bytes.
fn print_listpack(lp: &[u8]) {
    use crate::collections::listpack;
    let mut text = String::new();
    let _ = writeln!(
        text,
        "{{total bytes {}}} {{num entries {}}}",
        lp.len(),
        listpack::count(lp)
    );
    let mut at = listpack::first(lp);
    let mut index = 0;
    while let Some(off) = at {
        let size = listpack::size_at(lp, off).min(lp.len() - off);
        let _ = writeln!(
            text,
            "{{\n\tindex: {index:2},\n\toffset: {off},\n\thdr+entrylen+backlen: {size:2}"
        );
        text.push_str("\tbytes: ");
        for b in &lp[off..off + size] {
            let _ = write!(text, "{b:02x}|");
        }
        let v = listpack::get(lp, off).to_vec();
        let shown = &v[..v.len().min(40)];
        let _ = writeln!(
            text,
            "\n\t[str]{}{}\n}}",
            String::from_utf8_lossy(shown),
            if v.len() > 40 { "..." } else { "" }
        );
        index += 1;
        at = listpack::next(lp, off);
    }
    text.push_str("{end}\n\n");
    print_stdout(&text);
}

/// Prints a list's nodes on stdout (DEBUG QUICKLIST), in the layout of Redis's
/// `quicklistRepr`; with `full`, each node's listpack too. cairn's nodes are never
/// compressed and never plain.
fn print_quicklist(ks: &Keyspace, e: crate::arena::Ref, full: bool) {
    use crate::collections::list;
    let segs = list::segments(ks, e);
    let mut text = String::new();
    let _ = writeln!(text, "{{count : {}}}", list::len(ks, e));
    let _ = writeln!(text, "{{len : {}}}", segs.len());
    print_stdout(&text);
    for (i, &s) in segs.iter().enumerate() {
        let lp = list::seg_lp(ks, e, s);
        print_stdout(&format!(
            "{{quicklist node({i})\n{{container : PACKED, encoding: RAW, size: {}, count: {}, recompress: 0, attempted_compress: 0}}\n",
            lp.len(),
            crate::collections::listpack::count(lp)
        ));
        if full {
            print_stdout("{ listpack:\n");
            print_listpack(lp);
            print_stdout("}\n}\n");
        }
    }
}

fn print_stdout(text: &str) {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}

/// DEBUG STRINGMATCH-TEST: random patterns against random strings through the glob
/// matcher (Redis's stringmatchlen fuzz test): the point is that nothing crashes or
/// runs away. Bounded: 100,000 pairs of at most 32 bytes.
fn stringmatch_fuzz() {
    let mut rng = crate::util::Rng::from_time();
    let mut pat = [0u8; 32];
    let mut s = [0u8; 32];
    for _ in 0..100_000 {
        let pl = rng.below(32) as usize;
        let sl = rng.below(32) as usize;
        for b in pat.iter_mut().take(pl) {
            *b = rng.below(256) as u8;
        }
        for b in s.iter_mut().take(sl) {
            *b = rng.below(256) as u8;
        }
        let _ = crate::util::glob_match(&pat[..pl], &s[..sl], false);
    }
}

/// DEBUG CHANGE-REPL-ID: a new random replication id (cairn keeps no second id, so
/// there is none to clear); replicas can no longer continue from the old one.
fn change_replication_id(srv: &mut Server) {
    let mut rng = crate::util::Rng::from_time();
    srv.master_replid = (0..40)
        .map(|_| char::from_digit(rng.below(16) as u32, 16).unwrap_or('0'))
        .collect();
    srv.aof.replid = srv.master_replid.clone();
}

pub(super) fn debug_help(ctx: &mut Ctx) -> CmdResult {
    help_reply(
        &mut ctx.out,
        "DEBUG",
        &[
            "AOF-PAUSE-SYNCS <0|1>",
            "    With 1 the append only file issues no fsync: under appendfsync always,",
            "    write replies and reads of the keys they wrote wait until it is set to 0.",
            "AOF-HOLD-VALUES <0|1>",
            "    With 1 the append only file's writer waits before copying values logged",
            "    by reference (64 KiB and more), and so before writing anything after them.",
            "CHANGE-REPL-ID",
            "    Change the replication ID of the instance.",
            "    Dangerous: should be used only for testing the replication subsystem.",
            "DIGEST",
            "    Output a hex signature representing the current DB content.",
            "DIGEST-VALUE <key> [<key> ...]",
            "    Output a hex signature of the values of all the specified keys.",
            "LISTPACK <key>",
            "    Show low level info about the listpack encoding of <key> (on stdout).",
            "LOADAOF",
            "    Write the AOF buffers to the log and reload the AOF in memory.",
            "OBJECT <key>",
            "    Show low level info about `key` and associated value.",
            "PROTOCOL <type>",
            "    Reply with a test value of the specified type. <type> can be: string,",
            "    integer, double, bignum, null, array, set, map, attrib, push, verbatim,",
            "    true, false.",
            "QUICKLIST <key> [<0|1>]",
            "    Show low level info about the quicklist encoding of <key> (on stdout).",
            "    The optional argument (0 by default) sets the level of detail.",
            "QUICKLIST-PACKED-THRESHOLD <size>",
            "    Only 0 (restore the default) is accepted: every list element is packed.",
            "RELOAD [option ...]",
            "    Save the snapshot image on disk and reload it back to memory. Valid <option>",
            "    values:",
            "    * MERGE: conflicting keys will be loaded from the image.",
            "    * NOFLUSH: the existing database will not be removed before load, and",
            "      conflicting keys refuse the load (nothing is changed then).",
            "    * NOSAVE: the database will be loaded from the existing image.",
            "SET-ACTIVE-EXPIRE <0|1>",
            "    Setting it to 0 disables expiring keys in background when they are not",
            "    accessed (otherwise the Redis behavior). Setting it to 1 reenables back the",
            "    default.",
            "SLEEP <seconds>",
            "    Stop the server for <seconds> (at most an hour). Decimals allowed.",
            "STRINGMATCH-TEST",
            "    Run a fuzz tester against the glob matcher.",
        ],
    );
    Ok(())
}

/// Bytes RDB would use for a length prefix (6-bit, 14-bit, 32-bit or 64-bit forms).
pub(super) fn rdb_len_bytes(n: u64) -> u64 {
    if n < 1 << 6 {
        1
    } else if n < 1 << 14 {
        2
    } else if n <= u32::MAX as u64 {
        5
    } else {
        9
    }
}

/// DEBUG OBJECT's `serializedlength`: the value's size in an RDB dump without LZF
/// compression (integers in their compact 1/2/4-byte forms).
pub(super) fn serialized_length(ks: &Keyspace, e: crate::arena::Ref) -> u64 {
    let v = ks.value(e);
    // Only canonical integers that fit 32 bits take RDB's integer forms.
    let int = (ks.kind(e) == Kind::String && v.len() <= 11)
        .then(|| crate::util::parse_i64(v))
        .flatten()
        .filter(|n| n.to_string().as_bytes() == v);
    match int {
        Some(n) if (-128..=127).contains(&n) => return 2,
        Some(n) if (-32768..=32767).contains(&n) => return 3,
        Some(n) if (i32::MIN as i64..=i32::MAX as i64).contains(&n) => return 5,
        _ => {}
    }
    rdb_len_bytes(v.len() as u64) + v.len() as u64
}

pub(super) fn debug_object_line(ks: &Keyspace, e: crate::arena::Ref, list_fill: i64) -> String {
    let addr = ks.arena.base_addr() as u64 + e as u64 * 8;
    let encoding = crate::commands::keys::encoding_name(ks, e);
    let lru = ks.lru(e) & crate::keyspace::LRU_CLOCK_MAX;
    let now = crate::keyspace::lru_clock();
    let idle = if now >= lru {
        now - lru
    } else {
        crate::keyspace::LRU_CLOCK_MAX - lru + now
    };
    format!(
        "Value at:0x{addr:x} refcount:1 encoding:{encoding} serializedlength:{} lru:{lru} lru_seconds_idle:{idle}{}{}",
        serialized_length(ks, e),
        quicklist_fields(ks, e, list_fill),
        internal_encoding_field(ks, e)
    )
}

/// Where cairn's representation differs from the 7.0 encoding it reports, DEBUG OBJECT
/// says what it really is (as Redis appends its own fields for lists): a small set of
/// strings kept as a listpack.
fn internal_encoding_field(ks: &Keyspace, e: crate::arena::Ref) -> &'static str {
    if ks.kind(e) == Kind::Set && ks.enc(e) == crate::collections::set::ENC_LISTPACK {
        " cairn_encoding:listpack"
    } else {
        ""
    }
}

/// The quicklist fields Redis appends to DEBUG OBJECT for lists (an inline list counts
/// as one node, as the single node Redis would have).
pub(super) fn quicklist_fields(ks: &Keyspace, e: crate::arena::Ref, fill: i64) -> String {
    use crate::collections::list;
    if ks.kind(e) != Kind::List {
        return String::new();
    }
    let segs = list::segments(ks, e);
    let nodes = segs.len().max(1);
    let size: usize = segs.iter().map(|&s| list::seg_lp(ks, e, s).len()).sum();
    let avg = list::len(ks, e) as f64 / nodes as f64;
    format!(
        " ql_nodes:{nodes} ql_avg_node:{avg:.2} ql_listpack_max:{fill} ql_compressed:0 ql_uncompressed_size:{size}"
    )
}

pub(super) fn hex(d: &[u8; 20]) -> String {
    let mut s = String::with_capacity(40);
    for b in d {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// digest ^= SHA1(data)
pub(super) fn xor_digest(digest: &mut [u8; 20], data: &[u8]) {
    let h = sha1::digest(data);
    for (d, x) in digest.iter_mut().zip(h) {
        *d ^= x;
    }
}

/// digest = SHA1(digest ^ SHA1(data)): order-sensitive mixing.
pub(super) fn mix_digest(digest: &mut [u8; 20], data: &[u8]) {
    xor_digest(digest, data);
    *digest = sha1::digest(digest);
}

/// Mixes one value into `digest` as Redis's DEBUG DIGEST does: the type (big-endian
/// u32), the value, then a marker if the key has a TTL. Strings give Redis's exact
/// digest; other types are mixed from their stored bytes.
pub(super) fn xor_object_digest(ks: &Keyspace, e: crate::arena::Ref, digest: &mut [u8; 20]) {
    let kind = ks.kind(e);
    // Redis's OBJ_* type numbers: the kinds' own up to hashes, OBJ_STREAM is 6.
    let type_code = if kind == Kind::Stream { 6 } else { kind as u32 };
    mix_digest(digest, &type_code.to_be_bytes());
    match kind {
        // Lists: every element mixed in order; hashes: each field/value pair's own
        // digest XORed in (order-free), exactly as Redis's xorObjectDigest.
        Kind::List => crate::collections::list::walk(ks, e, 0, false, |v| {
            mix_digest(digest, &v.to_vec());
            true
        }),
        Kind::Hash => crate::collections::hash::for_each(ks, e, |f, v| {
            let mut d = [0u8; 20];
            mix_digest(&mut d, &f.to_vec());
            mix_digest(&mut d, &v.to_vec());
            xor_digest(digest, &d);
        }),
        // Sorted sets: like hashes, each member/score pair's own digest XORed in, the
        // score as Redis 7.0's `%.17g` text.
        Kind::ZSet => crate::collections::zset::walk(ks, e, 0, false, |m, s| {
            let mut d = [0u8; 20];
            mix_digest(&mut d, m);
            mix_digest(&mut d, crate::protocol::reply::format_double(s).as_bytes());
            xor_digest(digest, &d);
            true
        }),
        // Sets: each member's SHA1 XORed in (order-free), as Redis.
        Kind::Set => crate::collections::set::for_each(ks, e, |m| {
            xor_digest(digest, &m.to_vec());
        }),
        // Streams: each live entry's `ms.seq` then its fields and values, in order.
        Kind::Stream => {
            use crate::collections::stream::{self, Id, Meta};
            let m = Meta::read(ks.value(e));
            stream::range(&ks.arena, &m, Id::MIN, Id::MAX, false, |id, pairs| {
                mix_digest(digest, format!("{}.{}", id.ms, id.seq).as_bytes());
                for (f, v) in pairs {
                    mix_digest(digest, &f);
                    mix_digest(digest, &v);
                }
                true
            });
        }
        _ => mix_digest(digest, ks.value(e)),
    }
    if ks.has_expire(e) {
        xor_digest(digest, b"!!expire!!");
    }
}

/// The tier's state for DEBUG's `tiered-*` subcommands; their error with tiering off.
fn tier_state<'a>(
    ctx: &'a mut Ctx,
) -> Result<&'a mut crate::commands::executor::tiering::TierState, CmdError> {
    ctx.srv
        .tiering
        .as_deref_mut()
        .ok_or_else(|| CmdError::err("tiering is off (tiered-prefix is empty)"))
}

/// DEBUG DIGEST: XOR of the SHA1s of per-key digests (so key order does not matter), each database
/// mixed in by index; 20 zero bytes when the dataset is empty.
pub fn dataset_digest(ks: &Keyspace) -> [u8; 20] {
    let mut fin = [0u8; 20];
    for db in 0..ks.num_dbs() {
        if ks.dbsize(db) == 0 {
            continue;
        }
        mix_digest(&mut fin, &(db as u32).to_be_bytes());
        let mut cursor = 0;
        loop {
            cursor = ks.scan(db, cursor, |e| {
                let mut d = [0u8; 20];
                mix_digest(&mut d, ks.key(e));
                xor_object_digest(ks, e, &mut d);
                xor_digest(&mut fin, &d);
            });
            if cursor == 0 {
                break;
            }
        }
    }
    fin
}

/// Bytes reserved (not committed) for the scratch keyspace a cold value is digested in:
/// a tiered value is at most 16 MiB.
const SCRATCH_RESERVE_BYTES: usize = 256 << 20;

/// [`xor_object_digest`] of a cold entry: its value read synchronously from the tier file
/// (left cold) and placed in a scratch keyspace (made on first use), where the
/// collections' walkers digest it as they would in RAM. Err: the read failed, by key.
fn cold_object_digest(
    ks: &mut Keyspace,
    e: crate::arena::Ref,
    scratch: &mut Option<Keyspace>,
    digest: &mut [u8; 20],
) -> Result<(), String> {
    let (kind, enc) = (ks.kind(e), ks.enc(e));
    let ttl = ks
        .expire_at(e)
        .map_or(crate::keyspace::Ttl::Clear, crate::keyspace::Ttl::At);
    let key = ks.key(e).to_vec();
    let value = ks.read_cold_value(e).map_err(|m| {
        format!(
            "tiered read of key '{}' failed: {m}",
            String::from_utf8_lossy(&key)
        )
    })?;
    let scratch = match scratch {
        Some(s) => s,
        None => {
            let arena = crate::arena::Arena::new(SCRATCH_RESERVE_BYTES, [7, 11])
                .map_err(|e| format!("no scratch space to digest tiered values: {e}"))?;
            scratch.insert(crate::collections::new_keyspace(arena, 1))
        }
    };
    let se = scratch.set_value(0, b"v", kind, enc, &value, ttl);
    xor_object_digest(scratch, se, digest);
    Ok(())
}

/// DEBUG DIGEST while values are cold: as [`dataset_digest`], each cold value read
/// synchronously on the executor (a debug command; Redis computes DIGEST on its main
/// thread too) and left cold.
fn dataset_digest_reading_cold(ks: &mut Keyspace) -> Result<[u8; 20], String> {
    let mut fin = [0u8; 20];
    let mut scratch = None;
    for db in 0..ks.num_dbs() {
        if ks.dbsize(db) == 0 {
            continue;
        }
        mix_digest(&mut fin, &(db as u32).to_be_bytes());
        let mut cursor = 0;
        loop {
            let mut cold = Vec::new();
            cursor = ks.scan(db, cursor, |e| {
                if ks.is_cold(e) {
                    cold.push(ks.key(e).to_vec());
                    return;
                }
                let mut d = [0u8; 20];
                mix_digest(&mut d, ks.key(e));
                xor_object_digest(ks, e, &mut d);
                xor_digest(&mut fin, &d);
            });
            // Per-key digests are XORed: their order does not matter.
            for key in cold {
                let Some(e) = ks.find_raw(db, &key) else {
                    continue;
                };
                let mut d = [0u8; 20];
                mix_digest(&mut d, &key);
                cold_object_digest(ks, e, &mut scratch, &mut d)?;
                xor_digest(&mut fin, &d);
            }
            if cursor == 0 {
                break;
            }
        }
    }
    Ok(fin)
}

/// SHA-1, for DEBUG DIGEST (Redis's digests are SHA-1 mixes of the dataset).
mod sha1 {
    use sha1::{Digest, Sha1};

    pub fn digest(data: &[u8]) -> [u8; 20] {
        Sha1::digest(data).into()
    }

    #[cfg(test)]
    mod tests {
        #[test]
        fn known_vectors() {
            let hex = |d: [u8; 20]| d.iter().map(|b| format!("{b:02x}")).collect::<String>();
            assert_eq!(
                hex(super::digest(b"")),
                "da39a3ee5e6b4b0d3255bfef95601890afd80709"
            );
            assert_eq!(
                hex(super::digest(b"abc")),
                "a9993e364706816aba3e25717850c26c9cd0d89d"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rdb_length_prefixes() {
        assert_eq!(rdb_len_bytes(63), 1);
        assert_eq!(rdb_len_bytes(64), 2);
        assert_eq!(rdb_len_bytes(16383), 2);
        assert_eq!(rdb_len_bytes(16384), 5);
    }
}
