//! Stream consumer-group commands (Redis 7.0's `t_stream.c`): XGROUP CREATE /
//! CREATECONSUMER / DELCONSUMER / DESTROY / SETID / HELP, XREADGROUP (blocking included),
//! XACK, XPENDING, XCLAIM, XAUTOCLAIM, XINFO GROUPS / CONSUMERS and the groups part of
//! XINFO STREAM FULL. Storage is `collections::stream_groups`.
//!
//! Propagation as Redis: XREADGROUP, XCLAIM and XAUTOCLAIM are never logged as given
//! (a replay would deliver other entries at other times). Each pending entry they create,
//! move or drop is logged as `XCLAIM key group consumer 0 id TIME ms RETRYCOUNT n FORCE
//! JUSTID LASTID group-last-id`; a group's last ID moved without such an XCLAIM (NOACK,
//! XCLAIM's LASTID alone) as `XGROUP SETID key group id ENTRIESREAD n`; a consumer a NOACK
//! read created as `XGROUP CREATECONSUMER`. These forms go to `aof.command_forms`, and a
//! change is counted (`Ctx::dirty`) only with a form, so a read that changed nothing
//! worth logging (history, a consumer created by a read that delivered nothing, as Redis
//! does not propagate those either) is not logged at all.

use super::notify::{notify, NOTIFY_STREAM};
use super::streams::{
    meta, parse_id, parse_interval, parse_strict, read_stream, reply_entry, save_meta,
    write_stream, Entries, BLOCKED_DEFAULT_COUNT,
};
use super::{CmdError, CmdResult, CommandSpec, Ctx};
use super::{BLOCKING, DENYOOM, FAST, LOADING, READONLY, STALE, WRITE};
use crate::arena::{Ref, NULL};
use crate::collections::stream::{self, Id, Meta};
use crate::collections::stream_groups::{self as sg, INVALID_ENTRIES_READ};
use crate::keyspace::{Kind, Ttl};
use crate::protocol::reply::Resp;

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new("xgroup", -2, 0, "stream", xgroup_container)
        .acl(0)
        .doc("A container for consumer groups commands.", "5.0.0")
        .subs(XGROUP_SUBS),
    CommandSpec::new("xreadgroup", -7, WRITE | BLOCKING, "stream", xreadgroup).doc(
        "Return new entries from a stream using a consumer group, or access the history of the pending entries for a given consumer. Can block.",
        "5.0.0",
    ),
    CommandSpec::new("xack", -4, WRITE | FAST, "stream", xack)
        .keys(1, 1, 1)
        .doc(
            "Marks a pending message as correctly processed, effectively removing it from the pending entries list of the consumer group. Return value of the command is the number of messages successfully acknowledged, that is, the IDs we were actually able to resolve in the PEL.",
            "5.0.0",
        ),
    CommandSpec::new("xpending", -3, READONLY, "stream", xpending)
        .keys(1, 1, 1)
        .doc(
            "Return information and entries from a stream consumer group pending entries list, that are messages fetched but never acknowledged.",
            "5.0.0",
        ),
    CommandSpec::new("xclaim", -6, WRITE | FAST, "stream", xclaim)
        .keys(1, 1, 1)
        .doc(
            "Changes (or acquires) ownership of a message in a consumer group, as if the message was delivered to the specified consumer.",
            "5.0.0",
        ),
    CommandSpec::new("xautoclaim", -6, WRITE | FAST, "stream", xautoclaim)
        .keys(1, 1, 1)
        .doc(
            "Changes (or acquires) ownership of messages in a consumer group, as if the messages were delivered to the specified consumer.",
            "6.2.0",
        ),
];

static XGROUP_SUBS: &[CommandSpec] = &[
    CommandSpec::new("create", -5, WRITE | DENYOOM, "stream", xgroup)
        .keys(2, 2, 1)
        .doc("Create a consumer group.", "5.0.0"),
    CommandSpec::new("createconsumer", 5, WRITE | DENYOOM, "stream", xgroup)
        .keys(2, 2, 1)
        .doc("Create a consumer in a consumer group.", "6.2.0"),
    CommandSpec::new("delconsumer", 5, WRITE, "stream", xgroup)
        .keys(2, 2, 1)
        .doc("Delete a consumer from a consumer group.", "5.0.0"),
    CommandSpec::new("destroy", 4, WRITE, "stream", xgroup)
        .keys(2, 2, 1)
        .doc("Destroy a consumer group.", "5.0.0"),
    CommandSpec::new("setid", -5, WRITE, "stream", xgroup)
        .keys(2, 2, 1)
        .doc(
            "Set a consumer group to an arbitrary last delivered ID value.",
            "5.0.0",
        ),
    CommandSpec::new("help", 2, LOADING | STALE, "stream", xgroup_help)
        .doc("Show helpful text about the different subcommands", "5.0.0"),
];

/// Bytes a new pending entry may take in the arena (a node of the top level).
const NACK_ROOM_BYTES: u64 = 40 + 8 * sg::MAX_LEVEL as u64;
/// A new consumer or group: its block, its PEL head, the name.
const MEMBER_ROOM_BYTES: u64 = 256;

/// An entry's field/value pairs.
type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

// ---- helpers -----------------------------------------------------------------------------

/// A name as Redis's `%s` prints it in an error: up to a NUL (line breaks become spaces
/// when the error is written).
fn shown(b: &[u8]) -> &[u8] {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    &b[..end]
}

/// Answers an error made of `parts` (client bytes echoed as they are).
fn fail(ctx: &mut Ctx, parts: &[&[u8]]) -> CmdResult {
    ctx.out.error_bytes(&parts.concat());
    Ok(())
}

fn nogroup(ctx: &mut Ctx, key: &[u8], group: &[u8]) -> CmdResult {
    fail(
        ctx,
        &[
            b"NOGROUP No such key '",
            shown(key),
            b"' or consumer group '",
            shown(group),
            b"'",
        ],
    )
}

fn nogroup_for_key(ctx: &mut Ctx, group: &[u8], key: &[u8]) -> CmdResult {
    fail(
        ctx,
        &[
            b"NOGROUP No such consumer group '",
            shown(group),
            b"' for key name '",
            shown(key),
            b"'",
        ],
    )
}

/// Counts a change and queues its log form (nothing is queued while the log replays).
fn emit(ctx: &mut Ctx, form: Vec<Vec<u8>>) {
    ctx.dirty(1);
    if propagating(ctx) {
        ctx.srv.aof.command_forms.push(form);
    }
}

/// Whether an emitted form is kept: the forms built per delivered entry are built only
/// then (the dirty count moves either way).
fn propagating(ctx: &Ctx) -> bool {
    ctx.srv.aof.enabled && !ctx.srv.loading
}

/// The ID argument of an emitted XCLAIM: the client's own bytes, or an ID printed only
/// when the form is kept.
enum IdArg<'a> {
    Given(&'a [u8]),
    Id(Id),
}

fn emit_xclaim(ctx: &mut Ctx, key: &[u8], group: &[u8], g: Ref, id_arg: IdArg, n: Ref) {
    if !propagating(ctx) {
        ctx.dirty(1);
        return;
    }
    let id_arg = match id_arg {
        IdArg::Given(b) => b.to_vec(),
        IdArg::Id(id) => id.to_bytes(),
    };
    let a = &ctx.srv.ks.arena;
    let k = sg::nack(a, n);
    let cname = sg::consumer_name(a, k.consumer).to_vec();
    let last = sg::group(a, g).last_id;
    emit(
        ctx,
        vec![
            b"XCLAIM".to_vec(),
            key.to_vec(),
            group.to_vec(),
            cname,
            b"0".to_vec(),
            id_arg,
            b"TIME".to_vec(),
            k.delivery_time_ms.to_string().into_bytes(),
            b"RETRYCOUNT".to_vec(),
            k.delivery_count.to_string().into_bytes(),
            b"FORCE".to_vec(),
            b"JUSTID".to_vec(),
            b"LASTID".to_vec(),
            last.to_bytes(),
        ],
    );
}

fn emit_setid(ctx: &mut Ctx, key: &[u8], group: &[u8], g: Ref) {
    if !propagating(ctx) {
        ctx.dirty(1);
        return;
    }
    let gi = sg::group(&ctx.srv.ks.arena, g);
    emit(
        ctx,
        vec![
            b"XGROUP".to_vec(),
            b"SETID".to_vec(),
            key.to_vec(),
            group.to_vec(),
            gi.last_id.to_bytes(),
            b"ENTRIESREAD".to_vec(),
            gi.entries_read.to_string().into_bytes(),
        ],
    );
}

/// The stream's group named `name`.
fn group_of(ctx: &Ctx, e: Ref, name: &[u8]) -> Option<Ref> {
    let m = meta(ctx, e);
    sg::find_group(&ctx.srv.ks.arena, m.groups, name)
}

/// Redis's streamLookupConsumer (seen time refreshed) or streamCreateConsumer (announced).
fn lookup_or_create_consumer(ctx: &mut Ctx, g: Ref, name: &[u8], key: &[u8]) -> (Ref, bool) {
    let now = ctx.now_ms;
    if let Some(c) = sg::find_consumer(&ctx.srv.ks.arena, g, name) {
        sg::set_seen(&mut ctx.srv.ks.arena, c, now);
        return (c, false);
    }
    let c = sg::create_consumer(&mut ctx.srv.ks.arena, g, name, now).unwrap_or(NULL);
    notify(ctx, NOTIFY_STREAM, "xgroup-createconsumer", key);
    (c, true)
}

/// The live entry `id` of the stream (Redis's streamEntryExists plus its fields).
fn entry(ctx: &Ctx, m: &Meta, id: Id) -> Option<Vec<(Vec<u8>, Vec<u8>)>> {
    let mut got = None;
    stream::range(&ctx.srv.ks.arena, m, id, id, false, |_, p| {
        got = Some(p);
        false
    });
    got
}

/// Redis's addReplySubcommandSyntaxError: the subcommand as typed, at most 128 bytes.
fn subcommand_syntax(ctx: &mut Ctx, family: &str) -> CmdResult {
    let sub = shown(ctx.args.get(1));
    let sub = &sub[..sub.len().min(128)];
    let tail = format!("'. Try {family} HELP.");
    fail(
        ctx,
        &[
            b"ERR unknown subcommand or wrong number of arguments for '",
            sub,
            tail.as_bytes(),
        ],
    )
}

fn help(ctx: &mut Ctx, name: &str, lines: &[&str]) {
    ctx.out.array(lines.len() + 3);
    ctx.out.simple(&format!(
        "{name} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
    ));
    for l in lines {
        ctx.out.simple(l);
    }
    ctx.out.simple("HELP");
    ctx.out.simple("    Prints this help.");
}

// ---- XGROUP ------------------------------------------------------------------------------

fn xgroup_container(ctx: &mut Ctx) -> CmdResult {
    subcommand_syntax(ctx, "XGROUP")
}

fn xgroup_help(ctx: &mut Ctx) -> CmdResult {
    help(
        ctx,
        "XGROUP",
        &[
            "CREATE <key> <groupname> <id|$> [option]",
            "    Create a new consumer group. Options are:",
            "    * MKSTREAM",
            "      Create the empty stream if it does not exist.",
            "    * ENTRIESREAD entries_read",
            "      Set the group's entries_read counter (internal use).",
            "CREATECONSUMER <key> <groupname> <consumer>",
            "    Create a new consumer in the specified group.",
            "DELCONSUMER <key> <groupname> <consumer>",
            "    Remove the specified consumer.",
            "DESTROY <key> <groupname>",
            "    Remove the specified group.",
            "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
            "    Set the current group ID and entries_read counter.",
        ],
    );
    Ok(())
}

/// XGROUP CREATE / SETID / DESTROY / CREATECONSUMER / DELCONSUMER (Redis's xgroupCommand:
/// options, then the key, then the group, then the subcommand's own checks).
fn xgroup(ctx: &mut Ctx) -> CmdResult {
    let sub = ctx.spec.name;
    let argc = ctx.args.len();
    let create = sub == "create";
    let setid = sub == "setid";
    let mut mkstream = false;
    let mut entries_read = INVALID_ENTRIES_READ;
    let mut i = 5;
    while i < argc {
        if create && ctx.args.is(i, "mkstream") {
            mkstream = true;
            i += 1;
        } else if (create || setid) && ctx.args.is(i, "entriesread") && i + 1 < argc {
            entries_read = ctx.args.i64(i + 1)?;
            if entries_read < 0 && entries_read != INVALID_ENTRIES_READ {
                return Err(CmdError::err(
                    "value for ENTRIESREAD must be positive or -1",
                ));
            }
            i += 2;
        } else {
            return subcommand_syntax(ctx, "XGROUP");
        }
    }
    let key = ctx.args.get(2);
    let gname = ctx.args.get(3);
    let found = write_stream(ctx, key)?;
    let mut g = None;
    if !mkstream {
        let Some(e) = found else {
            return Err(CmdError::err("The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically."));
        };
        g = group_of(ctx, e, gname);
        if g.is_none() && matches!(sub, "setid" | "createconsumer" | "delconsumer") {
            return nogroup_for_key(ctx, gname, key);
        }
    }
    match sub {
        "create" if argc <= 8 => {
            let id = if ctx.args.get(4) == b"$" {
                found.map_or(Id::MIN, |e| meta(ctx, e).last_id)
            } else {
                parse_strict(ctx.args.get(4))?
            };
            ctx.ensure_arena_room(MEMBER_ROOM_BYTES + gname.len() as u64)?;
            let e = match found {
                Some(e) => e,
                None => {
                    let db = ctx.db();
                    ctx.srv.ks.set_value(
                        db,
                        key,
                        Kind::Stream,
                        stream::ENC_STREAM,
                        &stream::empty_value(),
                        Ttl::Clear,
                    )
                }
            };
            let mut m = meta(ctx, e);
            let created = sg::create_group(
                &mut ctx.srv.ks.arena,
                &mut m.groups,
                gname,
                id,
                entries_read,
            );
            save_meta(ctx, e, &m);
            if created.is_some() {
                ctx.out.ok();
                ctx.dirty(1);
                notify(ctx, NOTIFY_STREAM, "xgroup-create", key);
            } else {
                return Err(CmdError::raw(
                    "BUSYGROUP Consumer Group name already exists",
                ));
            }
        }
        "setid" if argc == 5 || argc == 7 => {
            let (Some(e), Some(g)) = (found, g) else {
                return subcommand_syntax(ctx, "XGROUP");
            };
            let id = if ctx.args.get(4) == b"$" {
                meta(ctx, e).last_id
            } else {
                parse_id(ctx.args.get(4), 0, false, None)?
            };
            sg::set_group_last(&mut ctx.srv.ks.arena, g, id, entries_read);
            ctx.out.ok();
            ctx.dirty(1);
            notify(ctx, NOTIFY_STREAM, "xgroup-setid", key);
        }
        "destroy" => match (found, g) {
            (Some(e), Some(g)) => {
                let mut m = meta(ctx, e);
                sg::destroy_group(&mut ctx.srv.ks.arena, &mut m.groups, g);
                save_meta(ctx, e, &m);
                ctx.out.int(1);
                // Counting the change signals the key: XREADGROUPs blocked on the group
                // answer NOGROUP.
                ctx.dirty(1);
                notify(ctx, NOTIFY_STREAM, "xgroup-destroy", key);
            }
            _ => ctx.out.int(0),
        },
        "createconsumer" => {
            let Some(g) = g else {
                return subcommand_syntax(ctx, "XGROUP");
            };
            let cname = ctx.args.get(4);
            ctx.ensure_arena_room(MEMBER_ROOM_BYTES + cname.len() as u64)?;
            let now = ctx.now_ms;
            match sg::create_consumer(&mut ctx.srv.ks.arena, g, cname, now) {
                Some(_) => {
                    ctx.dirty(1);
                    notify(ctx, NOTIFY_STREAM, "xgroup-createconsumer", key);
                    ctx.out.int(1);
                }
                None => ctx.out.int(0),
            }
        }
        "delconsumer" => {
            let Some(g) = g else {
                return subcommand_syntax(ctx, "XGROUP");
            };
            let cname = ctx.args.get(4);
            let mut pending = 0;
            if let Some(c) = sg::find_consumer(&ctx.srv.ks.arena, g, cname) {
                pending = sg::delete_consumer(&mut ctx.srv.ks.arena, g, c);
                ctx.dirty(1);
                notify(ctx, NOTIFY_STREAM, "xgroup-delconsumer", key);
            }
            ctx.out.int(pending as i64);
        }
        _ => return subcommand_syntax(ctx, "XGROUP"),
    }
    Ok(())
}

// ---- XREADGROUP --------------------------------------------------------------------------

/// What one stream of an XREADGROUP answers.
enum Served {
    /// New entries (`>`).
    New(Entries),
    /// The consumer's history: IDs with their fields, or None for an entry deleted since.
    History(Vec<(Id, Option<Pairs>)>),
}

fn xreadgroup(ctx: &mut Ctx) -> CmdResult {
    let argc = ctx.args.len();
    let super::streams::ReadOptions {
        timeout_ms,
        block_arg,
        count,
        streams_arg,
        group_arg,
        noack,
    } = super::streams::parse_read_options(ctx, true)?;
    if group_arg == 0 {
        return Err(CmdError::err("Missing GROUP option for XREADGROUP"));
    }
    let gname = ctx.args.get(group_arg);
    let cname = ctx.args.get(group_arg + 1);
    let n = (argc - streams_arg) / 2;
    // A re-run of a parked read answers for the key that woke it, once.
    let woken_by = super::streams::woken_key(ctx);
    // `>` is None; another ID asks for the consumer's history after it.
    let mut ids: Vec<Option<Id>> = Vec::with_capacity(n);
    for k in 0..n {
        let key = ctx.args.get(streams_arg + k);
        if let Some(w) = &woken_by {
            if key != &w[..] {
                ids.push(None);
                continue;
            }
            // Redis serves a woken read from its group's state: a group gone by now is
            // this error, not the usual NOGROUP.
            let g = read_stream(ctx, key)?.and_then(|e| group_of(ctx, e, gname));
            if g.is_none() {
                return Err(CmdError::raw(
                    "NOGROUP the consumer group this client was blocked on no longer exists",
                ));
            }
        } else {
            let found = read_stream(ctx, key)?;
            if found.and_then(|e| group_of(ctx, e, gname)).is_none() {
                return fail(
                    ctx,
                    &[
                        b"NOGROUP No such key '",
                        shown(key),
                        b"' or consumer group '",
                        shown(gname),
                        b"' in XREADGROUP with GROUP option",
                    ],
                );
            }
        }
        let arg = ctx.args.get(streams_arg + n + k);
        if arg == b"$" {
            return Err(CmdError::err("The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set."));
        }
        if arg == b">" {
            ids.push(None);
            continue;
        }
        // Redis marks `>` as the last possible ID: that ID given explicitly reads as `>`.
        let id = parse_strict(arg)?;
        ids.push((id != Id::MAX).then_some(id));
    }
    let mut served: Vec<(usize, Served)> = Vec::new();
    for (k, want) in ids.iter().enumerate() {
        let key = ctx.args.get(streams_arg + k);
        let served_keys = served.iter().map(|(j, _)| ctx.args.get(streams_arg + j));
        if !super::streams::answers_for(woken_by.as_deref(), key, served_keys) {
            continue;
        }
        let Some(e) = read_stream(ctx, key)? else {
            continue;
        };
        let m = meta(ctx, e);
        let Some(g) = sg::find_group(&ctx.srv.ks.arena, m.groups, gname) else {
            continue;
        };
        let glast = sg::group(&ctx.srv.ks.arena, g).last_id;
        let start = match want {
            Some(id) => *id,
            None => {
                // Woken by a write: served when the stream's last ID passed the group's,
                // even if the entries past it are gone (the key with no entries).
                let ready = if woken_by.is_some() {
                    m.last_id > glast
                } else {
                    m.length > 0 && stream::last_valid_id(&ctx.srv.ks.arena, &m) > glast
                };
                if !ready {
                    continue;
                }
                glast
            }
        };
        // Redis's streamIncrID wraps past the last possible ID to 0-0 (and its caller
        // reads on from there).
        let start = start.incr().unwrap_or(Id::MIN);
        let limit = if count > 0 { count as u64 } else { u64::MAX };
        // The entries to deliver are read first, so the room checked is what this read
        // allocates: a pending entry per new entry (none for history or NOACK).
        let items = if want.is_some() {
            None
        } else {
            let mut items: Entries = Vec::new();
            stream::range(&ctx.srv.ks.arena, &m, start, Id::MAX, false, |id, pairs| {
                items.push((id, pairs));
                (items.len() as u64) < limit
            });
            Some(items)
        };
        let new_entries = match &items {
            Some(v) if !noack => v.len() as u64,
            _ => 0,
        };
        let room =
            MEMBER_ROOM_BYTES + cname.len() as u64 + NACK_ROOM_BYTES.saturating_mul(new_entries);
        ctx.ensure_arena_room(room)?;
        let (c, created) = lookup_or_create_consumer(ctx, g, cname, key);
        if created && noack {
            emit(
                ctx,
                vec![
                    b"XGROUP".to_vec(),
                    b"CREATECONSUMER".to_vec(),
                    key.to_vec(),
                    gname.to_vec(),
                    cname.to_vec(),
                ],
            );
        }
        match items {
            None => served.push((k, Served::History(history(ctx, &m, c, start, limit)))),
            Some(items) => {
                deliver(ctx, key, gname, &m, g, c, &items, noack);
                served.push((k, Served::New(items)));
            }
        }
    }
    if !served.is_empty() {
        let resp3 = ctx.client.resp == Resp::V3;
        if resp3 {
            ctx.out.map(served.len());
        } else {
            ctx.out.array(served.len());
        }
        for (k, s) in &served {
            if !resp3 {
                ctx.out.array(2);
            }
            ctx.out.bulk(ctx.args.get(streams_arg + k));
            match s {
                Served::New(items) => {
                    ctx.out.array(items.len());
                    for (id, pairs) in items {
                        reply_entry(ctx, *id, pairs);
                    }
                }
                Served::History(items) => {
                    ctx.out.array(items.len());
                    for (id, pairs) in items {
                        match pairs {
                            Some(p) => reply_entry(ctx, *id, p),
                            None => {
                                ctx.out.array(2);
                                ctx.out.bulk(&id.to_bytes());
                                ctx.out.null_array();
                            }
                        }
                    }
                }
            }
        }
        return Ok(());
    }
    let Some(t) = timeout_ms else {
        ctx.out.null_array();
        return Ok(());
    };
    if !ctx.srv.may_block_now() {
        ctx.out.null_array();
        return Ok(());
    }
    // Every ID is `>` here (history is always answered at once): parked with the count a
    // served blocked read gets.
    let mut argv: Vec<Vec<u8>> = vec![
        ctx.args.get(0).to_vec(),
        b"GROUP".to_vec(),
        gname.to_vec(),
        cname.to_vec(),
        b"BLOCK".to_vec(),
        ctx.args.get(block_arg).to_vec(),
        b"COUNT".to_vec(),
        (if count > 0 {
            count
        } else {
            BLOCKED_DEFAULT_COUNT
        })
        .to_string()
        .into_bytes(),
    ];
    if noack {
        argv.push(b"NOACK".to_vec());
    }
    argv.push(b"STREAMS".to_vec());
    let keys: Vec<Vec<u8>> = (0..n)
        .map(|k| ctx.args.get(streams_arg + k).to_vec())
        .collect();
    argv.extend(keys.iter().cloned());
    argv.extend((0..n).map(|_| b">".to_vec()));
    let deadline = if t == 0 {
        0
    } else {
        ctx.now_ms.saturating_add(t)
    };
    ctx.srv.block_stream_read(keys, deadline, argv);
    ctx.srv.blocking.request_unblock_if_gone();
    Ok(())
}

/// Redis's streamReplyWithRangeFromConsumerPEL: the consumer's pending entries from
/// `start`, each delivered again (time now, count + 1) when it still exists.
fn history(ctx: &mut Ctx, m: &Meta, c: Ref, start: Id, limit: u64) -> Vec<(Id, Option<Pairs>)> {
    let mut out = Vec::new();
    let mut n = sg::cpel_seek(&ctx.srv.ks.arena, c, start);
    while n != NULL && (out.len() as u64) < limit {
        let k = sg::nack(&ctx.srv.ks.arena, n);
        let pairs = entry(ctx, m, k.id);
        if pairs.is_some() {
            let now = ctx.now_ms;
            sg::set_delivery(
                &mut ctx.srv.ks.arena,
                n,
                now,
                k.delivery_count.wrapping_add(1),
            );
        }
        out.push((k.id, pairs));
        n = sg::cpel_next(&ctx.srv.ks.arena, n);
    }
    out
}

/// Redis's streamReplyWithRange with a group, for `items` read from the stream: the
/// group's last ID and read counter moved past them, each added to the PEL (or moved to
/// this consumer) unless NOACK, with the log forms that rebuild it.
#[allow(clippy::too_many_arguments)]
fn deliver(
    ctx: &mut Ctx,
    key: &[u8],
    gname: &[u8],
    m: &Meta,
    g: Ref,
    c: Ref,
    items: &Entries,
    noack: bool,
) {
    let mut moved_last = false;
    for (id, _) in items {
        let a = &mut ctx.srv.ks.arena;
        let gi = sg::group(a, g);
        if *id > gi.last_id {
            let er = if gi.entries_read != INVALID_ENTRIES_READ && !sg::has_tombstones_from(m, *id)
            {
                gi.entries_read + 1
            } else if m.entries_added > 0 {
                sg::estimate_entries_read(m, *id)
            } else {
                gi.entries_read
            };
            sg::set_group_last(a, g, *id, er);
            moved_last = true;
        }
        if noack {
            continue;
        }
        let now = ctx.now_ms;
        let n = match sg::pel_find(a, g, *id) {
            Some(n) => {
                sg::pel_assign(a, n, c);
                sg::set_delivery(a, n, now, 1);
                n
            }
            None => sg::pel_add(a, g, c, *id, now, 1),
        };
        emit_xclaim(ctx, key, gname, g, IdArg::Id(*id), n);
    }
    if noack && moved_last {
        emit_setid(ctx, key, gname, g);
    }
}

// ---- XACK / XPENDING ---------------------------------------------------------------------

fn xack(ctx: &mut Ctx) -> CmdResult {
    let key = ctx.args.get(1);
    let g = match read_stream(ctx, key)? {
        Some(e) => group_of(ctx, e, ctx.args.get(2)),
        None => None,
    };
    let Some(g) = g else {
        ctx.out.int(0);
        return Ok(());
    };
    let ids = (3..ctx.args.len())
        .map(|i| parse_strict(ctx.args.get(i)))
        .collect::<Result<Vec<Id>, CmdError>>()?;
    let mut acked = 0u64;
    for id in ids {
        if sg::pel_remove(&mut ctx.srv.ks.arena, g, id) {
            acked += 1;
        }
    }
    ctx.dirty(acked);
    ctx.out.int(acked as i64);
    Ok(())
}

fn xpending(ctx: &mut Ctx) -> CmdResult {
    let argc = ctx.args.len();
    let key = ctx.args.get(1);
    let gname = ctx.args.get(2);
    if argc != 3 && !(6..=9).contains(&argc) {
        return Err(CmdError::Syntax);
    }
    let mut range: Option<(Id, Id, i64, Option<&[u8]>)> = None;
    let mut min_idle_ms = 0i64;
    if argc >= 6 {
        let mut at = 3;
        if ctx.args.is(3, "idle") {
            min_idle_ms = ctx.args.i64(4)?;
            if argc < 8 {
                return Err(CmdError::Syntax);
            }
            at += 2;
        }
        let count = ctx.args.i64(at + 2)?.max(0);
        let (mut start, sx) = parse_interval(ctx.args.get(at), 0)?;
        if sx {
            start = start
                .incr()
                .ok_or_else(|| CmdError::err("invalid start ID for the interval"))?;
        }
        let (mut end, ex) = parse_interval(ctx.args.get(at + 1), u64::MAX)?;
        if ex {
            end = end
                .decr()
                .ok_or_else(|| CmdError::err("invalid end ID for the interval"))?;
        }
        let consumer = (at + 3 < argc).then(|| ctx.args.get(at + 3));
        range = Some((start, end, count, consumer));
    }
    let Some(e) = read_stream(ctx, key)? else {
        return nogroup(ctx, key, gname);
    };
    let Some(g) = group_of(ctx, e, gname) else {
        return nogroup(ctx, key, gname);
    };
    let a = &ctx.srv.ks.arena;
    let Some((start, end, mut count, consumer)) = range else {
        let gi = sg::group(a, g);
        ctx.out.array(4);
        ctx.out.int(gi.pel_count as i64);
        if gi.pel_count == 0 {
            ctx.out.null();
            ctx.out.null();
            ctx.out.null_array();
            return Ok(());
        }
        let first = sg::nack(a, sg::pel_seek(a, g, Id::MIN)).id;
        let last = sg::nack(a, sg::pel_last(a, g)).id;
        let owners: Vec<(Vec<u8>, u64)> = sg::consumers(a, g)
            .into_iter()
            .map(|c| sg::consumer(a, c))
            .filter(|c| c.pel_count > 0)
            .map(|c| (c.name, c.pel_count))
            .collect();
        ctx.out.bulk(&first.to_bytes());
        ctx.out.bulk(&last.to_bytes());
        ctx.out.array(owners.len());
        for (name, k) in owners {
            ctx.out.array(2);
            ctx.out.bulk(&name);
            ctx.out.bulk(k.to_string().as_bytes());
        }
        return Ok(());
    };
    let (mut n, by_consumer) = match consumer {
        Some(name) => match sg::find_consumer(a, g, name) {
            Some(c) => (sg::cpel_seek(a, c, start), true),
            None => {
                ctx.out.array(0);
                return Ok(());
            }
        },
        None => (sg::pel_seek(a, g, start), false),
    };
    let now = ctx.now_ms;
    let mut rows: Vec<(Id, Vec<u8>, i64, u64)> = Vec::new();
    while count > 0 && n != NULL {
        let k = sg::nack(a, n);
        if k.id > end {
            break;
        }
        n = if by_consumer {
            sg::cpel_next(a, n)
        } else {
            sg::pel_next(a, n)
        };
        let idle = now.wrapping_sub(k.delivery_time_ms);
        if min_idle_ms != 0 && idle < min_idle_ms {
            continue;
        }
        count -= 1;
        rows.push((
            k.id,
            sg::consumer_name(a, k.consumer).to_vec(),
            idle.max(0),
            k.delivery_count,
        ));
    }
    ctx.out.array(rows.len());
    for (id, name, idle, deliveries) in rows {
        ctx.out.array(4);
        ctx.out.bulk(&id.to_bytes());
        ctx.out.bulk(&name);
        ctx.out.int(idle);
        ctx.out.int(deliveries as i64);
    }
    Ok(())
}

// ---- XCLAIM / XAUTOCLAIM -----------------------------------------------------------------

fn int_or(ctx: &Ctx, i: usize, msg: &str) -> Result<i64, CmdError> {
    crate::util::parse_i64(ctx.args.get(i)).ok_or_else(|| CmdError::err(msg))
}

fn xclaim(ctx: &mut Ctx) -> CmdResult {
    let key = ctx.args.get(1);
    let gname = ctx.args.get(2);
    let cname = ctx.args.get(3);
    let argc = ctx.args.len();
    let Some(e) = read_stream(ctx, key)? else {
        return nogroup(ctx, key, gname);
    };
    let Some(g) = group_of(ctx, e, gname) else {
        return nogroup(ctx, key, gname);
    };
    let min_idle_ms = int_or(ctx, 4, "Invalid min-idle-time argument for XCLAIM")?.max(0);
    let mut ids = Vec::new();
    let mut j = 5;
    while j < argc {
        match parse_strict(ctx.args.get(j)) {
            Ok(id) => ids.push((id, j)),
            Err(_) => break,
        }
        j += 1;
    }
    let now = ctx.now_ms;
    let mut force = false;
    let mut justid = false;
    let mut delivery_ms: Option<i64> = None;
    let mut retry: Option<i64> = None;
    let mut last_id = Id::MIN;
    while j < argc {
        let more = argc - 1 - j;
        if ctx.args.is(j, "force") {
            force = true;
        } else if ctx.args.is(j, "justid") {
            justid = true;
        } else if ctx.args.is(j, "idle") && more > 0 {
            j += 1;
            let idle = int_or(ctx, j, "Invalid IDLE option argument for XCLAIM")?;
            delivery_ms = Some(now.wrapping_sub(idle));
        } else if ctx.args.is(j, "time") && more > 0 {
            j += 1;
            delivery_ms = Some(int_or(ctx, j, "Invalid TIME option argument for XCLAIM")?);
        } else if ctx.args.is(j, "retrycount") && more > 0 {
            j += 1;
            retry = Some(int_or(
                ctx,
                j,
                "Invalid RETRYCOUNT option argument for XCLAIM",
            )?);
        } else if ctx.args.is(j, "lastid") && more > 0 {
            j += 1;
            last_id = parse_strict(ctx.args.get(j))?;
        } else {
            return fail(
                ctx,
                &[
                    b"ERR Unrecognized XCLAIM option '",
                    shown(ctx.args.get(j)),
                    b"'",
                ],
            );
        }
        j += 1;
    }
    // A bogus time (negative, in the future) is now, as Redis: clients compute it from
    // their own clocks.
    let delivery_ms = match delivery_ms {
        Some(t) if t >= 0 && t <= now => t,
        _ => now,
    };
    let room = MEMBER_ROOM_BYTES + cname.len() as u64 + NACK_ROOM_BYTES * ids.len() as u64;
    ctx.ensure_arena_room(room)?;
    let mut propagate_last = false;
    {
        let a = &mut ctx.srv.ks.arena;
        let gi = sg::group(a, g);
        if last_id > gi.last_id {
            sg::set_group_last(a, g, last_id, gi.entries_read);
            propagate_last = true;
        }
    }
    let m = meta(ctx, e);
    let mut consumer: Option<Ref> = None;
    let mut claimed: Vec<(Id, Option<Pairs>)> = Vec::new();
    for (id, at) in ids {
        let mut n = sg::pel_find(&ctx.srv.ks.arena, g, id);
        let Some(pairs) = entry(ctx, &m, id) else {
            // The entry is gone: its pending entry goes too (and is logged going).
            if let Some(n) = n {
                emit_xclaim(ctx, key, gname, g, IdArg::Given(ctx.args.get(at)), n);
                propagate_last = false;
                sg::pel_remove(&mut ctx.srv.ks.arena, g, id);
            }
            continue;
        };
        let fresh = n.is_none();
        if fresh && !force {
            continue;
        }
        if let Some(k) = n.map(|n| sg::nack(&ctx.srv.ks.arena, n)) {
            if min_idle_ms > 0 && now.wrapping_sub(k.delivery_time_ms) < min_idle_ms {
                continue;
            }
        }
        let c = match consumer {
            Some(c) => c,
            None => {
                let c = lookup_or_create_consumer(ctx, g, cname, key).0;
                consumer = Some(c);
                c
            }
        };
        let a = &mut ctx.srv.ks.arena;
        // A NACK FORCE creates starts as Redis's streamCreateNACK: delivered once, now.
        let node = match n.take() {
            Some(node) => {
                sg::pel_assign(a, node, c);
                node
            }
            None => sg::pel_add(a, g, c, id, now, 1),
        };
        let k = sg::nack(a, node);
        let deliveries = match retry {
            Some(r) if r >= 0 => r as u64,
            _ if !justid => k.delivery_count.wrapping_add(1),
            _ => k.delivery_count,
        };
        sg::set_delivery(a, node, delivery_ms, deliveries);
        claimed.push((id, (!justid).then_some(pairs)));
        emit_xclaim(ctx, key, gname, g, IdArg::Given(ctx.args.get(at)), node);
        propagate_last = false;
    }
    if propagate_last {
        emit_setid(ctx, key, gname, g);
    }
    ctx.out.array(claimed.len());
    for (id, pairs) in &claimed {
        match pairs {
            Some(p) => reply_entry(ctx, *id, p),
            None => ctx.out.bulk(&id.to_bytes()),
        }
    }
    Ok(())
}

fn xautoclaim(ctx: &mut Ctx) -> CmdResult {
    let key = ctx.args.get(1);
    let gname = ctx.args.get(2);
    let cname = ctx.args.get(3);
    let argc = ctx.args.len();
    let min_idle_ms = int_or(ctx, 4, "Invalid min-idle-time argument for XAUTOCLAIM")?.max(0);
    let (mut start, sx) = parse_interval(ctx.args.get(5), 0)?;
    if sx {
        start = start
            .incr()
            .ok_or_else(|| CmdError::err("invalid start ID for the interval"))?;
    }
    // Redis's bound: COUNT times the 16 bytes of an ID (or the 10 attempts per entry)
    // must fit a long.
    const MAX_COUNT: i64 = i64::MAX / 16;
    let mut count: i64 = 100;
    let mut justid = false;
    let mut j = 6;
    while j < argc {
        let more = argc - 1 - j;
        if ctx.args.is(j, "count") && more > 0 {
            count = match crate::util::parse_i64(ctx.args.get(j + 1)) {
                Some(c) if (1..=MAX_COUNT).contains(&c) => c,
                _ => return Err(CmdError::err("COUNT must be > 0")),
            };
            j += 1;
        } else if ctx.args.is(j, "justid") {
            justid = true;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    let Some(e) = read_stream(ctx, key)? else {
        return nogroup(ctx, key, gname);
    };
    let Some(g) = group_of(ctx, e, gname) else {
        return nogroup(ctx, key, gname);
    };
    ctx.ensure_arena_room(MEMBER_ROOM_BYTES + cname.len() as u64)?;
    let m = meta(ctx, e);
    let now = ctx.now_ms;
    let mut attempts = count.saturating_mul(10);
    let mut consumer: Option<Ref> = None;
    let mut claimed: Vec<(Id, Option<Pairs>)> = Vec::new();
    let mut deleted: Vec<Id> = Vec::new();
    let mut n = sg::pel_seek(&ctx.srv.ks.arena, g, start);
    while attempts > 0 && count > 0 && n != NULL {
        attempts -= 1;
        let k = sg::nack(&ctx.srv.ks.arena, n);
        let next = sg::pel_next(&ctx.srv.ks.arena, n);
        let Some(pairs) = entry(ctx, &m, k.id) else {
            emit_xclaim(ctx, key, gname, g, IdArg::Id(k.id), n);
            sg::pel_remove(&mut ctx.srv.ks.arena, g, k.id);
            deleted.push(k.id);
            count -= 1;
            n = next;
            continue;
        };
        if min_idle_ms > 0 && now.wrapping_sub(k.delivery_time_ms) < min_idle_ms {
            n = next;
            continue;
        }
        let c = match consumer {
            Some(c) => c,
            None => {
                let c = lookup_or_create_consumer(ctx, g, cname, key).0;
                consumer = Some(c);
                c
            }
        };
        let a = &mut ctx.srv.ks.arena;
        sg::pel_assign(a, n, c);
        let deliveries = if justid {
            k.delivery_count
        } else {
            k.delivery_count.wrapping_add(1)
        };
        sg::set_delivery(a, n, now, deliveries);
        claimed.push((k.id, (!justid).then_some(pairs)));
        count -= 1;
        emit_xclaim(ctx, key, gname, g, IdArg::Id(k.id), n);
        n = next;
    }
    let cursor = if n == NULL {
        Id::MIN
    } else {
        sg::nack(&ctx.srv.ks.arena, n).id
    };
    ctx.out.array(3);
    ctx.out.bulk(&cursor.to_bytes());
    ctx.out.array(claimed.len());
    for (id, pairs) in &claimed {
        match pairs {
            Some(p) => reply_entry(ctx, *id, p),
            None => ctx.out.bulk(&id.to_bytes()),
        }
    }
    ctx.out.array(deleted.len());
    for id in &deleted {
        ctx.out.bulk(&id.to_bytes());
    }
    Ok(())
}

// ---- XINFO -------------------------------------------------------------------------------

pub(super) fn xinfo_help(ctx: &mut Ctx) -> CmdResult {
    help(
        ctx,
        "XINFO",
        &[
            "CONSUMERS <key> <groupname>",
            "    Show consumers of <groupname>.",
            "GROUPS <key>",
            "    Show the stream consumer groups.",
            "STREAM <key> [FULL [COUNT <count>]",
            "    Show information about the stream.",
        ],
    );
    Ok(())
}

fn reply_entries_read(ctx: &mut Ctx, entries_read: i64) {
    if entries_read != INVALID_ENTRIES_READ {
        ctx.out.int(entries_read);
    } else {
        ctx.out.null();
    }
}

fn reply_lag(ctx: &mut Ctx, m: &Meta, gi: &sg::Group) {
    match sg::lag(m, gi.last_id, gi.entries_read) {
        Some(l) => ctx.out.int(l),
        None => ctx.out.null(),
    }
}

pub(super) fn xinfo_groups(ctx: &mut Ctx) -> CmdResult {
    let key = ctx.args.get(2);
    let Some(e) = read_stream(ctx, key)? else {
        return Err(CmdError::NoSuchKey);
    };
    let m = meta(ctx, e);
    let a = &ctx.srv.ks.arena;
    let groups: Vec<sg::Group> = sg::groups(a, m.groups)
        .into_iter()
        .map(|g| sg::group(a, g))
        .collect();
    ctx.out.array(groups.len());
    for gi in &groups {
        ctx.out.map(6);
        ctx.out.bulk(b"name");
        ctx.out.bulk(&gi.name);
        ctx.out.bulk(b"consumers");
        ctx.out.int(gi.consumer_count as i64);
        ctx.out.bulk(b"pending");
        ctx.out.int(gi.pel_count as i64);
        ctx.out.bulk(b"last-delivered-id");
        ctx.out.bulk(&gi.last_id.to_bytes());
        ctx.out.bulk(b"entries-read");
        reply_entries_read(ctx, gi.entries_read);
        ctx.out.bulk(b"lag");
        reply_lag(ctx, &m, gi);
    }
    Ok(())
}

pub(super) fn xinfo_consumers(ctx: &mut Ctx) -> CmdResult {
    let key = ctx.args.get(2);
    let gname = ctx.args.get(3);
    let Some(e) = read_stream(ctx, key)? else {
        return Err(CmdError::NoSuchKey);
    };
    let Some(g) = group_of(ctx, e, gname) else {
        return nogroup_for_key(ctx, gname, key);
    };
    let a = &ctx.srv.ks.arena;
    let cs: Vec<sg::Consumer> = sg::consumers(a, g)
        .into_iter()
        .map(|c| sg::consumer(a, c))
        .collect();
    let now = ctx.now_ms;
    ctx.out.array(cs.len());
    for c in cs {
        ctx.out.map(3);
        ctx.out.bulk(b"name");
        ctx.out.bulk(&c.name);
        ctx.out.bulk(b"pending");
        ctx.out.int(c.pel_count as i64);
        ctx.out.bulk(b"idle");
        ctx.out.int(now.wrapping_sub(c.seen_time_ms).max(0));
    }
    Ok(())
}

/// The `groups` array of XINFO STREAM FULL: each group with its PEL and consumers (at
/// most `count` pending entries each, 0: all).
pub fn reply_full_groups(ctx: &mut Ctx, m: &Meta, count: u64) {
    let a = &ctx.srv.ks.arena;
    let gs = sg::groups(a, m.groups);
    ctx.out.array(gs.len());
    for g in gs {
        let a = &ctx.srv.ks.arena;
        let gi = sg::group(a, g);
        let limit = if count == 0 { u64::MAX } else { count };
        let mut pel = Vec::new();
        let mut n = sg::pel_seek(a, g, Id::MIN);
        while n != NULL && (pel.len() as u64) < limit {
            let k = sg::nack(a, n);
            pel.push((k, sg::consumer_name(a, k.consumer).to_vec()));
            n = sg::pel_next(a, n);
        }
        let mut cs = Vec::new();
        for c in sg::consumers(a, g) {
            let ci = sg::consumer(a, c);
            let mut own = Vec::new();
            let mut n = sg::cpel_seek(a, c, Id::MIN);
            while n != NULL && (own.len() as u64) < limit {
                own.push(sg::nack(a, n));
                n = sg::cpel_next(a, n);
            }
            cs.push((ci, own));
        }
        ctx.out.map(7);
        ctx.out.bulk(b"name");
        ctx.out.bulk(&gi.name);
        ctx.out.bulk(b"last-delivered-id");
        ctx.out.bulk(&gi.last_id.to_bytes());
        ctx.out.bulk(b"entries-read");
        reply_entries_read(ctx, gi.entries_read);
        ctx.out.bulk(b"lag");
        reply_lag(ctx, m, &gi);
        ctx.out.bulk(b"pel-count");
        ctx.out.int(gi.pel_count as i64);
        ctx.out.bulk(b"pending");
        ctx.out.array(pel.len());
        for (k, name) in &pel {
            ctx.out.array(4);
            ctx.out.bulk(&k.id.to_bytes());
            ctx.out.bulk(name);
            ctx.out.int(k.delivery_time_ms);
            ctx.out.int(k.delivery_count as i64);
        }
        ctx.out.bulk(b"consumers");
        ctx.out.array(cs.len());
        for (ci, own) in &cs {
            ctx.out.map(4);
            ctx.out.bulk(b"name");
            ctx.out.bulk(&ci.name);
            ctx.out.bulk(b"seen-time");
            ctx.out.int(ci.seen_time_ms);
            ctx.out.bulk(b"pel-count");
            ctx.out.int(ci.pel_count as i64);
            ctx.out.bulk(b"pending");
            ctx.out.array(own.len());
            for k in own {
                ctx.out.array(3);
                ctx.out.bulk(&k.id.to_bytes());
                ctx.out.int(k.delivery_time_ms);
                ctx.out.int(k.delivery_count as i64);
            }
        }
    }
}

/// The number of groups (XINFO STREAM).
pub fn group_count(ctx: &Ctx, m: &Meta) -> u64 {
    sg::group_count(&ctx.srv.ks.arena, m.groups)
}
