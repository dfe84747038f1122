//! What the server says about itself: COMMAND (INFO, DOCS, LIST, GETKEYS...), MEMORY,
//! SLOWLOG, LATENCY.

use super::*;

/// Finds `name` or `container|sub` in the command table.
pub(super) fn find_command(
    srv: &Server,
    name: &[u8],
) -> Option<(&'static CommandSpec, Option<&'static CommandSpec>)> {
    match name.iter().position(|&b| b == b'|') {
        None => srv.commands.lookup(name).map(|c| (c, None)),
        Some(p) => {
            let parent = srv.commands.lookup(&name[..p])?;
            let sub = &name[p + 1..];
            parent
                .subcommands
                .iter()
                .find(|s| s.name.as_bytes().eq_ignore_ascii_case(sub))
                .map(|s| (s, Some(parent)))
        }
    }
}

pub(super) fn display_name(spec: &CommandSpec, parent: Option<&CommandSpec>) -> String {
    match parent {
        Some(p) => crate::commands::full_name(p, spec),
        None => spec.name.to_string(),
    }
}

/// A command's ACL categories as COMMAND shows them (`@name`, Redis's order): the ones
/// its table entry declares plus those its flags imply (`commands::acl::categories`).
pub fn acl_categories(spec: &CommandSpec) -> Vec<String> {
    crate::commands::acl::command::category_list(spec)
}

/// Key-spec flags as COMMAND shows them (a set of status strings, Redis's order).
fn write_key_flags(out: &mut Reply, flags: u16) {
    let names = crate::commands::key_specs::KEY_FLAG_NAMES;
    out.set(names.iter().filter(|(bit, _)| flags & bit != 0).count());
    for (_, name) in names.iter().filter(|(bit, _)| flags & bit != 0) {
        out.simple(name);
    }
}

/// One key spec of COMMAND INFO's field 9: notes (when any), flags, begin_search, find_keys.
fn write_key_spec(out: &mut Reply, ks: &crate::commands::key_specs::KeySpec) {
    use crate::commands::key_specs::{Begin, Find};
    out.map(3 + !ks.notes.is_empty() as usize);
    if !ks.notes.is_empty() {
        out.bulk_str("notes");
        out.bulk_str(ks.notes);
    }
    out.bulk_str("flags");
    write_key_flags(out, ks.flags);
    out.bulk_str("begin_search");
    out.map(2);
    out.bulk_str("type");
    match ks.begin {
        Begin::Index(at) => {
            out.bulk_str("index");
            out.bulk_str("spec");
            out.map(1);
            out.bulk_str("index");
            out.int(at as i64);
        }
        Begin::Keyword(word, startfrom) => {
            out.bulk_str("keyword");
            out.bulk_str("spec");
            out.map(2);
            out.bulk_str("keyword");
            out.bulk_str(word);
            out.bulk_str("startfrom");
            out.int(startfrom as i64);
        }
        Begin::Unknown => {
            out.bulk_str("unknown");
            out.bulk_str("spec");
            out.map(0);
        }
    }
    out.bulk_str("find_keys");
    out.map(2);
    out.bulk_str("type");
    match ks.find {
        Find::Range(lastkey, keystep, limit) => {
            out.bulk_str("range");
            out.bulk_str("spec");
            out.map(3);
            for (name, v) in [("lastkey", lastkey), ("keystep", keystep), ("limit", limit)] {
                out.bulk_str(name);
                out.int(v as i64);
            }
        }
        Find::Keynum(keynumidx, firstkey, keystep) => {
            out.bulk_str("keynum");
            out.bulk_str("spec");
            out.map(3);
            for (name, v) in [
                ("keynumidx", keynumidx),
                ("firstkey", firstkey),
                ("keystep", keystep),
            ] {
                out.bulk_str(name);
                out.int(v as i64);
            }
        }
        Find::Unknown => {
            out.bulk_str("unknown");
            out.bulk_str("spec");
            out.map(0);
        }
    }
}

/// One COMMAND INFO entry (Redis 7's 10-element shape).
pub(super) fn write_command_info(
    out: &mut Reply,
    spec: &'static CommandSpec,
    parent: Option<&CommandSpec>,
) {
    out.array(10);
    out.bulk_str(&display_name(spec, parent));
    out.int(spec.arity as i64);
    let mut flags: Vec<&str> = FLAG_NAMES
        .iter()
        .filter(|(bit, _)| spec.flags & bit != 0)
        .map(|(_, n)| *n)
        .collect();
    // Redis's movablekeys: the command's keys are found by a key proc (numkeys, keywords),
    // listed after no_multi and before allow_busy.
    if parent.is_none() && crate::commands::propagate::has_key_proc(spec.name) {
        let at = flags
            .iter()
            .position(|f| *f == "allow_busy")
            .unwrap_or(flags.len());
        flags.insert(at, "movablekeys");
    }
    out.set(flags.len());
    for f in flags {
        out.simple(f);
    }
    out.int(spec.first_key as i64);
    out.int(spec.last_key as i64);
    out.int(spec.key_step as i64);
    let cats = acl_categories(spec);
    out.set(cats.len());
    for c in cats {
        out.simple(&c);
    }
    let meta = crate::commands::key_specs::lookup(&display_name(spec, parent));
    let tips = meta.map_or(&[][..], |m| m.tips);
    out.set(tips.len());
    for t in tips {
        out.bulk_str(t);
    }
    let specs = meta.map_or(&[][..], |m| m.key_specs);
    out.set(specs.len());
    for ks in specs {
        write_key_spec(out, ks);
    }
    out.set(spec.subcommands.len());
    for sub in spec.subcommands {
        write_command_info(out, sub, Some(spec));
    }
}

/// One COMMAND DOCS value, a map in Redis's order: summary, since, group, complexity,
/// doc_flags, deprecated_since, replaced_by, history, arguments, subcommands (each only
/// when there is something to say).
pub(super) fn write_command_docs(
    out: &mut Reply,
    spec: &'static CommandSpec,
    parent: Option<&CommandSpec>,
) {
    let doc = crate::commands::docs::lookup(&display_name(spec, parent));
    let (summary, since) = doc.map_or((spec.summary, spec.since), |d| (d.summary, d.since));
    let has = |s: &str| !s.is_empty() as usize;
    let len =
        3 + doc.map_or(0, |d| {
            has(d.complexity)
                + (d.doc_flags != 0) as usize
                + has(d.deprecated_since)
                + has(d.replaced_by)
                + !d.history.is_empty() as usize
                + !d.args.is_empty() as usize
        }) + !spec.subcommands.is_empty() as usize;
    out.map(len);
    out.bulk_str("summary");
    out.bulk_str(summary);
    out.bulk_str("since");
    out.bulk_str(since);
    out.bulk_str("group");
    out.bulk_str(spec.group);
    if let Some(d) = doc {
        if !d.complexity.is_empty() {
            out.bulk_str("complexity");
            out.bulk_str(d.complexity);
        }
        if d.doc_flags != 0 {
            out.bulk_str("doc_flags");
            write_flag_set(out, d.doc_flags, crate::commands::docs::DOC_FLAG_NAMES);
        }
        if !d.deprecated_since.is_empty() {
            out.bulk_str("deprecated_since");
            out.bulk_str(d.deprecated_since);
        }
        if !d.replaced_by.is_empty() {
            out.bulk_str("replaced_by");
            out.bulk_str(d.replaced_by);
        }
        if !d.history.is_empty() {
            out.bulk_str("history");
            out.set(d.history.len());
            for (version, change) in d.history {
                out.array(2);
                out.bulk_str(version);
                out.bulk_str(change);
            }
        }
        if !d.args.is_empty() {
            out.bulk_str("arguments");
            write_doc_args(out, d.args);
        }
    }
    if !spec.subcommands.is_empty() {
        out.bulk_str("subcommands");
        out.map(spec.subcommands.len());
        for sub in spec.subcommands {
            out.bulk_str(&display_name(sub, Some(spec)));
            write_command_docs(out, sub, Some(spec));
        }
    }
}

fn write_flag_set(out: &mut Reply, flags: u8, names: &[(u8, &str)]) {
    out.set(names.iter().filter(|(bit, _)| flags & bit != 0).count());
    for (_, name) in names.iter().filter(|(bit, _)| flags & bit != 0) {
        out.simple(name);
    }
}

/// An argument list of COMMAND DOCS: one map per argument (name, type, key_spec_index,
/// token, since, deprecated_since, flags, arguments).
fn write_doc_args(out: &mut Reply, args: &[crate::commands::docs::Arg]) {
    out.array(args.len());
    for arg in args {
        let has = |s: &str| !s.is_empty() as usize;
        let nested = matches!(arg.kind, "oneof" | "block");
        out.map(
            2 + (arg.key_spec_index >= 0) as usize
                + arg.token.is_some() as usize
                + has(arg.since)
                + has(arg.deprecated_since)
                + (arg.flags != 0) as usize
                + nested as usize,
        );
        out.bulk_str("name");
        out.bulk_str(arg.name);
        out.bulk_str("type");
        out.bulk_str(arg.kind);
        if arg.key_spec_index >= 0 {
            out.bulk_str("key_spec_index");
            out.int(arg.key_spec_index as i64);
        }
        if let Some(token) = arg.token {
            out.bulk_str("token");
            out.bulk_str(token);
        }
        for (field, value) in [
            ("since", arg.since),
            ("deprecated_since", arg.deprecated_since),
        ] {
            if !value.is_empty() {
                out.bulk_str(field);
                out.bulk_str(value);
            }
        }
        if arg.flags != 0 {
            out.bulk_str("flags");
            write_flag_set(out, arg.flags, crate::commands::docs::ARG_FLAG_NAMES);
        }
        if nested {
            out.bulk_str("arguments");
            write_doc_args(out, arg.args);
        }
    }
}

pub(super) fn command_all(ctx: &mut Ctx) -> CmdResult {
    let all = ctx.srv.commands.all.clone();
    ctx.out.array(all.len());
    for spec in all {
        write_command_info(&mut ctx.out, spec, None);
    }
    Ok(())
}

pub(super) fn command_count(ctx: &mut Ctx) -> CmdResult {
    ctx.out.int(ctx.srv.commands.len() as i64);
    Ok(())
}

pub(super) fn command_info(ctx: &mut Ctx) -> CmdResult {
    if ctx.args.len() == 2 {
        return command_all(ctx);
    }
    ctx.out.array(ctx.args.len() - 2);
    for i in 2..ctx.args.len() {
        match find_command(ctx.srv, ctx.args.get(i)) {
            Some((spec, parent)) => write_command_info(&mut ctx.out, spec, parent),
            None => ctx.out.null(),
        }
    }
    Ok(())
}

pub(super) fn command_docs(ctx: &mut Ctx) -> CmdResult {
    let mut found: Vec<(&'static CommandSpec, Option<&'static CommandSpec>)> = Vec::new();
    if ctx.args.len() == 2 {
        found.extend(ctx.srv.commands.all.iter().map(|s| (*s, None)));
    } else {
        for i in 2..ctx.args.len() {
            if let Some(f) = find_command(ctx.srv, ctx.args.get(i)) {
                found.push(f);
            }
        }
    }
    ctx.out.map(found.len());
    for (spec, parent) in found {
        ctx.out.bulk_str(&display_name(spec, parent));
        write_command_docs(&mut ctx.out, spec, parent);
    }
    Ok(())
}

pub(super) fn command_list(ctx: &mut Ctx) -> CmdResult {
    enum Filter {
        All,
        Module,
        AclCat(String),
        Pattern(Vec<u8>),
    }
    let filter = match ctx.args.len() {
        2 => Filter::All,
        5 if ctx.args.is(2, "FILTERBY") => {
            if ctx.args.is(3, "MODULE") {
                Filter::Module
            } else if ctx.args.is(3, "ACLCAT") {
                Filter::AclCat(format!("@{}", ctx.args.str(4).to_ascii_lowercase()))
            } else if ctx.args.is(3, "PATTERN") {
                Filter::Pattern(ctx.args.get(4).to_vec())
            } else {
                return Err(CmdError::Syntax);
            }
        }
        _ => return Err(CmdError::Syntax),
    };
    let mut names = Vec::new();
    for spec in ctx.srv.commands.all.iter() {
        let entries =
            std::iter::once((*spec, None)).chain(spec.subcommands.iter().map(|s| (s, Some(*spec))));
        for (s, parent) in entries {
            let name = display_name(s, parent);
            let keep = match &filter {
                Filter::All => true,
                Filter::Module => false,
                Filter::AclCat(c) => acl_categories(s).contains(c),
                Filter::Pattern(p) => crate::util::glob_match(p, name.as_bytes(), true),
            };
            if keep {
                names.push(name);
            }
        }
    }
    ctx.out.array(names.len());
    for n in names {
        ctx.out.bulk_str(&n);
    }
    Ok(())
}

/// COMMAND GETKEYS / GETKEYSANDFLAGS <full command>: the keys the command's key specs
/// (or, where they cannot tell, its own key finder) find, in Redis's order of checks.
pub(super) fn command_getkeys(ctx: &mut Ctx) -> CmdResult {
    let with_flags = ctx.args.is(1, "GETKEYSANDFLAGS");
    let argc = ctx.args.len() - 2;
    let Some(parent) = ctx.srv.commands.lookup(ctx.args.get(2)) else {
        return Err(CmdError::err("Invalid command specified"));
    };
    // A container with a subcommand argument names that subcommand (an unknown one is no
    // command at all).
    let (spec, name) = if !parent.subcommands.is_empty() && argc >= 2 {
        let sub = ctx.args.get(3);
        match parent
            .subcommands
            .iter()
            .find(|s| s.name.as_bytes().eq_ignore_ascii_case(sub))
        {
            Some(s) => (s, display_name(s, Some(parent))),
            None => return Err(CmdError::err("Invalid command specified")),
        }
    } else {
        (parent, parent.name.to_string())
    };
    if !crate::commands::key_specs::has_keys(&name) {
        return Err(CmdError::err("The command has no key arguments"));
    }
    if !spec.arity_ok(argc) {
        return Err(CmdError::err(
            "Invalid number of arguments specified for command",
        ));
    }
    let keys = crate::commands::key_specs::keys_with_flags(&name, ctx.args.skip(2));
    if keys.is_empty() && spec.flags & crate::commands::NO_MANDATORY_KEYS == 0 {
        return Err(CmdError::err("Invalid arguments specified for command"));
    }
    ctx.out.array(keys.len());
    for (at, flags) in keys {
        let key = ctx.args.get(2 + at);
        if with_flags {
            ctx.out.array(2);
            ctx.out.bulk(key);
            write_key_flags(&mut ctx.out, flags);
        } else {
            ctx.out.bulk(key);
        }
    }
    Ok(())
}

pub(super) fn command_help(ctx: &mut Ctx) -> CmdResult {
    help_reply(
        &mut ctx.out,
        "COMMAND",
        &[
            "(no subcommand)",
            "    Return details about all Redis commands.",
            "COUNT",
            "    Return the total number of commands in this Redis server.",
            "LIST",
            "    Return a list of all commands in this Redis server.",
            "INFO [<command-name> ...]",
            "    Return details about multiple Redis commands.",
            "    If no command names are given, documentation details for all",
            "    commands are returned.",
            "DOCS [<command-name> ...]",
            "    Return documentation details about multiple Redis commands.",
            "    If no command names are given, documentation details for all",
            "    commands are returned.",
            "GETKEYS <full-command>",
            "    Return the keys from a full Redis command.",
            "GETKEYSANDFLAGS <full-command>",
            "    Return the keys and the access flags from a full Redis command.",
        ],
    );
    Ok(())
}

/// Bytes a key costs: its entry block plus its share of the db's bucket array (and its
/// slot in the volatile-key index when it has a TTL).
pub fn key_memory_usage(ks: &Keyspace, db: usize, e: crate::arena::Ref) -> u64 {
    let keys = ks.dbsize(db).max(1);
    let bucket_share = (ks.buckets(db) * 4).div_ceil(keys);
    let volatile = if ks.has_expire(e) { 4 } else { 0 };
    // Collections also own out-of-line blocks (quicklist nodes, dict tables and entries).
    let out_of_line = crate::collections::out_of_line_bytes(&ks.arena, ks.kind(e), ks.value(e));
    ks.entry_alloc_bytes(e) as u64 + bucket_share + volatile + out_of_line
}

pub(super) fn memory_usage(ctx: &mut Ctx) -> CmdResult {
    let mut i = 3;
    while i < ctx.args.len() {
        if ctx.args.is(i, "SAMPLES") && i + 1 < ctx.args.len() {
            // Values live in one block, so there is nothing to sample; the count is
            // still validated as Redis does.
            if ctx.args.i64(i + 1)? < 0 {
                return Err(CmdError::Syntax);
            }
            i += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let db = ctx.db();
    match ctx.srv.ks.find(db, ctx.args.get(2), ctx.now_ms) {
        Some(e) => {
            let n = key_memory_usage(&ctx.srv.ks, db, e);
            ctx.out.int(n as i64);
        }
        None => ctx.out.null(),
    }
    Ok(())
}

pub(super) fn memory_stats(ctx: &mut Ctx) -> CmdResult {
    let m = mem_figures(ctx.srv);
    let srv = &*ctx.srv;
    let keys: u64 = (0..srv.ks.num_dbs()).map(|d| srv.ks.dbsize(d)).sum();
    let dbs: Vec<usize> = (0..srv.ks.num_dbs())
        .filter(|&d| srv.ks.dbsize(d) > 0)
        .collect();
    let allocated = srv.ks.arena.used_bytes();
    let out = &mut ctx.out;
    out.map(25 + dbs.len());
    let int = |out: &mut Reply, k: &str, v: u64| {
        out.bulk_str(k);
        out.int(v as i64);
    };
    int(out, "peak.allocated", m.peak);
    int(out, "total.allocated", m.used);
    int(out, "startup.allocated", m.startup);
    int(out, "replication.backlog", 0);
    int(out, "clients.slaves", 0);
    int(out, "clients.normal", srv.client_buffer_bytes);
    int(out, "cluster.links", 0);
    int(out, "aof.buffer", 0);
    int(out, "lua.caches", 0);
    int(out, "functions.caches", 0);
    int(out, "overhead.total", m.overhead);
    int(out, "keys.count", keys);
    int(
        out,
        "keys.bytes-per-key",
        m.dataset.checked_div(keys).unwrap_or(0),
    );
    int(out, "dataset.bytes", m.dataset);
    let pct = |a: u64, b: u64| ratio(a, b) * 100.0;
    out.bulk_str("dataset.percentage");
    out.double(pct(m.dataset, m.used.saturating_sub(m.startup)));
    out.bulk_str("peak.percentage");
    out.double(pct(m.used, m.peak));
    int(out, "allocator.allocated", allocated);
    int(out, "allocator.active", m.allocator_active);
    int(out, "allocator.resident", m.rss);
    out.bulk_str("allocator-fragmentation.ratio");
    out.double(ratio(m.allocator_active, allocated));
    int(
        out,
        "allocator-fragmentation.bytes",
        m.allocator_active.saturating_sub(allocated),
    );
    out.bulk_str("rss-overhead.ratio");
    out.double(1.0);
    int(out, "rss-overhead.bytes", 0);
    out.bulk_str("fragmentation");
    out.double(ratio(m.rss, m.used));
    int(out, "fragmentation.bytes", m.rss.saturating_sub(m.used));
    for d in dbs {
        out.bulk_str(&format!("db.{d}"));
        out.map(2);
        int(out, "overhead.hashtable.main", srv.ks.buckets(d) * 4);
        int(
            out,
            "overhead.hashtable.expires",
            srv.ks.volatile_count(d) * 4,
        );
    }
    Ok(())
}

/// MEMORY DOCTOR: a short plain-language report on the figures INFO memory shows.
pub(super) fn memory_doctor(ctx: &mut Ctx) -> CmdResult {
    let m = mem_figures(ctx.srv);
    let mut issues = Vec::new();
    if m.used >= 5 << 20 {
        if m.peak > m.used.saturating_mul(3) / 2 {
            issues.push(format!(
                "Peak memory ({}) is more than 150% of current use ({}); the arena keeps freed blocks for reuse, so resident memory stays near the peak.",
                bytes_to_human(m.peak),
                bytes_to_human(m.used)
            ));
        }
        if ratio(m.rss, m.used) > 1.4 {
            issues.push(format!(
                "Resident memory ({}) is more than 1.4 times the memory in use ({}).",
                bytes_to_human(m.rss),
                bytes_to_human(m.used)
            ));
        }
    }
    let report = if m.used < 5 << 20 {
        "This instance uses very little memory; there is nothing to diagnose yet.\n".to_string()
    } else if issues.is_empty() {
        "No memory issue found.\n".to_string()
    } else {
        let mut r = String::from("Memory issues found:\n\n");
        for i in issues {
            let _ = writeln!(r, " * {i}");
        }
        r
    };
    ctx.out.verbatim(report.as_bytes());
    Ok(())
}

pub(super) fn memory_help(ctx: &mut Ctx) -> CmdResult {
    help_reply(
        &mut ctx.out,
        "MEMORY",
        &[
            "DOCTOR",
            "    Return memory problems reports.",
            "MALLOC-STATS",
            "    Return internal statistics report from the memory allocator.",
            "PURGE",
            "    Attempt to purge dirty pages for reclamation by the allocator.",
            "STATS",
            "    Return information about the memory usage of the server.",
            "USAGE <key> [SAMPLES <count>]",
            "    Return memory in bytes used by <key> and its value. Nested values are",
            "    sampled up to <count> times (default: 5, 0 means sample all).",
        ],
    );
    Ok(())
}

pub(super) fn slowlog_get(ctx: &mut Ctx) -> CmdResult {
    let count = if ctx.args.len() == 3 {
        match crate::util::parse_i64(ctx.args.get(2)) {
            Some(n) if n >= -1 => n,
            _ => return Err(CmdError::err("count should be greater than or equal to -1")),
        }
    } else if ctx.args.len() == 2 {
        10
    } else {
        return Err(CmdError::err(format!(
            "unknown subcommand or wrong number of arguments for '{}'. Try SLOWLOG HELP.",
            ctx.args.str(1)
        )));
    };
    let total = ctx.srv.slowlog.entries.len();
    let n = if count == -1 {
        total
    } else {
        (count as u64).min(total as u64) as usize
    };
    ctx.out.array(n);
    for e in ctx.srv.slowlog.entries.iter().take(n) {
        ctx.out.array(6);
        ctx.out.int(e.id as i64);
        ctx.out.int(e.time_s);
        ctx.out.int(e.duration_us as i64);
        ctx.out.array(e.args.len());
        for a in &e.args {
            ctx.out.bulk(a);
        }
        ctx.out.bulk_str(&e.peer);
        ctx.out.bulk_str(&e.name);
    }
    Ok(())
}

pub(super) fn slowlog_len(ctx: &mut Ctx) -> CmdResult {
    ctx.out.int(ctx.srv.slowlog.entries.len() as i64);
    Ok(())
}

pub(super) fn slowlog_reset(ctx: &mut Ctx) -> CmdResult {
    ctx.srv.slowlog.entries.clear();
    ctx.out.ok();
    Ok(())
}

pub(super) fn slowlog_help(ctx: &mut Ctx) -> CmdResult {
    help_reply(
        &mut ctx.out,
        "SLOWLOG",
        &[
            "GET [<count>]",
            "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
            "    Entries are made of:",
            "    id, timestamp, time in microseconds, arguments array, client IP and port,",
            "    client name",
            "LEN",
            "    Return the length of the slowlog.",
            "RESET",
            "    Reset the slowlog.",
        ],
    );
    Ok(())
}

pub(super) fn latency_latest(ctx: &mut Ctx) -> CmdResult {
    let events = &ctx.srv.latency.events;
    let live: Vec<_> = events
        .iter()
        .filter_map(|(name, ev)| ev.samples.back().map(|s| (name, *s, ev.max_ms)))
        .collect();
    ctx.out.array(live.len());
    for (name, (ts, ms), max) in live {
        ctx.out.array(4);
        ctx.out.bulk_str(name);
        ctx.out.int(ts);
        ctx.out.int(ms as i64);
        ctx.out.int(max as i64);
    }
    Ok(())
}

pub(super) fn latency_history(ctx: &mut Ctx) -> CmdResult {
    let name = ctx.args.str(2);
    match ctx.srv.latency.events.get(&name) {
        None => ctx.out.array(0),
        Some(ev) => {
            ctx.out.array(ev.samples.len());
            for (ts, ms) in &ev.samples {
                ctx.out.array(2);
                ctx.out.int(*ts);
                ctx.out.int(*ms as i64);
            }
        }
    }
    Ok(())
}

pub(super) fn latency_reset(ctx: &mut Ctx) -> CmdResult {
    let names: Vec<String> = (2..ctx.args.len()).map(|i| ctx.args.str(i)).collect();
    let n = ctx.srv.latency.reset(&names);
    ctx.out.int(n as i64);
    Ok(())
}

/// LATENCY DOCTOR: a plain-language summary of the recorded latency events.
pub(super) fn latency_doctor(ctx: &mut Ctx) -> CmdResult {
    let threshold = ctx.srv.config.settings().latency_monitor_threshold;
    let mut report = String::new();
    if ctx.srv.latency.events.is_empty() {
        if threshold == 0 {
            report.push_str("Latency monitoring is disabled. Enable it with CONFIG SET latency-monitor-threshold <milliseconds>.\n");
        } else {
            report.push_str("No latency spike above the threshold was recorded.\n");
        }
    } else {
        report.push_str("Latency spikes were recorded:\n\n");
        for (i, (name, ev)) in ctx.srv.latency.events.iter().enumerate() {
            let n = ev.samples.len().max(1) as u64;
            let avg = ev.samples.iter().map(|s| s.1).sum::<u64>() / n;
            let _ = writeln!(
                report,
                "{}. {name}: {} spikes (average {avg}ms). Worst: {}ms.",
                i + 1,
                ev.samples.len(),
                ev.max_ms
            );
        }
        report.push_str("\nCheck the slow log (SLOWLOG GET) for the commands involved.\n");
    }
    ctx.out.verbatim(report.as_bytes());
    Ok(())
}

pub(super) fn latency_help(ctx: &mut Ctx) -> CmdResult {
    help_reply(
        &mut ctx.out,
        "LATENCY",
        &[
            "DOCTOR",
            "    Return a human readable latency analysis report.",
            "GRAPH <event>",
            "    Return an ASCII latency graph for the <event> class.",
            "HISTORY <event>",
            "    Return time-latency samples for the <event> class.",
            "LATEST",
            "    Return the latest latency samples for all events.",
            "RESET [<event> ...]",
            "    Reset latency data of one or more <event> classes.",
            "    (default: reset all data for all event classes)",
            "HISTOGRAM [COMMAND ...]",
            "    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
            "    If no commands are specified then all histograms are replied.",
        ],
    );
    Ok(())
}
