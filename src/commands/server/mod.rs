//! Server commands: the table, and DBSIZE, FLUSHDB/FLUSHALL, SHUTDOWN, TIME, LASTSAVE.
//! By subject: INFO (`info.rs`), CONFIG (`config.rs`), COMMAND / MEMORY / SLOWLOG /
//! LATENCY (`introspection.rs`), DEBUG (`debug.rs`).

mod allocator;
mod config;
mod debug;
mod debug_reload;
mod info;
mod introspection;
mod latency;

use allocator::*;
use config::*;
pub use debug::dataset_digest;
use debug::*;
use info::*;
pub use info::{bytes_to_human, info_text, rss_bytes};
use introspection::*;
pub use introspection::{acl_categories, key_memory_usage};

use super::{
    acl, CmdError, CmdResult, CommandSpec, Ctx, ADMIN, ALLOW_BUSY, FAST, FLAG_NAMES, LOADING,
    NOSCRIPT, NO_MULTI, PROTECTED, READONLY, STALE, WRITE,
};
use crate::commands::executor::{Server, ShutdownRequest};
use crate::keyspace::{Keyspace, Kind};
use crate::protocol::reply::Reply;
use std::fmt::Write as _;

const ADM: u32 = ADMIN | NOSCRIPT | LOADING | STALE;

const LS: u32 = LOADING | STALE;

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new("dbsize", 1, READONLY | FAST, "server", dbsize)
        .acl(acl::KEYSPACE)
        .doc("Returns the number of keys in the database.", "1.0.0"),
    CommandSpec::new("flushdb", -1, WRITE, "server", flushdb)
        .acl(acl::KEYSPACE | acl::DANGEROUS)
        .doc("Remove all keys from the current database.", "1.0.0"),
    CommandSpec::new("flushall", -1, WRITE, "server", flushall)
        .acl(acl::KEYSPACE | acl::DANGEROUS)
        .doc("Removes all keys from all databases.", "1.0.0"),
    CommandSpec::new(
        "shutdown",
        -1,
        ADMIN | NOSCRIPT | LOADING | STALE | NO_MULTI | ALLOW_BUSY,
        "server",
        shutdown,
    )
    .doc(
        "Synchronously saves the database(s) to disk and shuts down the Redis server.",
        "1.0.0",
    ),
    CommandSpec::new("info", -1, LS, "server", info)
        .acl(acl::DANGEROUS)
        .doc(
            "Returns information and statistics about the server.",
            "1.0.0",
        ),
    CommandSpec::new("config", -2, 0, "server", container)
        .doc("A container for server configuration commands.", "2.0.0")
        .subs(CONFIG_SUBS),
    CommandSpec::new("time", 1, LS | FAST, "server", time).doc("Returns the server time.", "2.6.0"),
    CommandSpec::new("lastsave", 1, LS | FAST, "server", lastsave)
        .acl(acl::ADMIN | acl::DANGEROUS)
        .doc(
            "Returns the Unix timestamp of the last successful save to disk.",
            "1.0.0",
        ),
    CommandSpec::new("command", -1, LS, "server", command_all)
        .acl(acl::CONNECTION)
        .doc("Returns detailed information about all commands.", "2.8.13")
        .subs(COMMAND_SUBS),
    CommandSpec::new("memory", -2, 0, "server", container)
        .doc("A container for memory diagnostics commands.", "4.0.0")
        .subs(MEMORY_SUBS),
    CommandSpec::new("slowlog", -2, 0, "server", container)
        .doc("A container for slow log commands.", "2.2.12")
        .subs(SLOWLOG_SUBS),
    CommandSpec::new("latency", -2, 0, "server", container)
        .doc("A container for latency diagnostics commands.", "2.8.13")
        .subs(LATENCY_SUBS),
    CommandSpec::new("debug", -2, ADM | PROTECTED, "server", debug)
        .doc("A container for debugging commands.", "1.0.0"),
];

static CONFIG_SUBS: &[CommandSpec] = &[
    CommandSpec::new("get", -3, ADM, "server", config_get).doc(
        "Returns the effective values of configuration parameters.",
        "2.0.0",
    ),
    CommandSpec::new("set", -4, ADM, "server", config_set)
        .doc("Sets configuration parameters in-flight.", "2.0.0"),
    CommandSpec::new("resetstat", 2, ADM, "server", config_resetstat)
        .doc("Resets the server's statistics.", "2.0.0"),
    CommandSpec::new("rewrite", 2, ADM, "server", config_rewrite)
        .doc("Persists the effective configuration to file.", "2.8.0"),
    CommandSpec::new("help", 2, LS, "server", config_help).doc(
        "Returns helpful text about the different subcommands.",
        "5.0.0",
    ),
];

static COMMAND_SUBS: &[CommandSpec] = &[
    CommandSpec::new("count", 2, LS, "server", command_count)
        .acl(acl::CONNECTION)
        .doc("Returns a count of commands.", "2.8.13"),
    CommandSpec::new("info", -2, LS, "server", command_info)
        .acl(acl::CONNECTION)
        .doc(
            "Returns information about one, multiple or all commands.",
            "2.8.13",
        ),
    CommandSpec::new("docs", -2, LS, "server", command_docs)
        .acl(acl::CONNECTION)
        .doc(
            "Returns documentary information about one, multiple or all commands.",
            "7.0.0",
        ),
    CommandSpec::new("list", -2, LS, "server", command_list)
        .acl(acl::CONNECTION)
        .doc("Returns a list of command names.", "7.0.0"),
    CommandSpec::new("getkeys", -4, LS, "server", command_getkeys)
        .acl(acl::CONNECTION)
        .doc(
            "Extracts the key names from an arbitrary command.",
            "2.8.13",
        ),
    CommandSpec::new("getkeysandflags", -4, LS, "server", command_getkeys)
        .acl(acl::CONNECTION)
        .doc(
            "Extracts the key names and access flags for an arbitrary command.",
            "7.0.0",
        ),
    CommandSpec::new("help", 2, LS, "server", command_help)
        .acl(acl::CONNECTION)
        .doc(
            "Returns helpful text about the different subcommands.",
            "5.0.0",
        ),
];

static MEMORY_SUBS: &[CommandSpec] = &[
    CommandSpec::new("usage", -3, READONLY, "server", memory_usage)
        .keys(2, 2, 1)
        .doc("Estimates the memory usage of a key.", "4.0.0"),
    CommandSpec::new("stats", 2, 0, "server", memory_stats)
        .doc("Returns details about memory usage.", "4.0.0"),
    CommandSpec::new("doctor", 2, 0, "server", memory_doctor)
        .doc("Outputs a memory problems report.", "4.0.0"),
    CommandSpec::new("malloc-stats", 2, 0, "server", memory_malloc_stats)
        .doc("Show allocator internal stats", "4.0.0"),
    CommandSpec::new("purge", 2, 0, "server", memory_purge)
        .doc("Ask the allocator to release memory", "4.0.0"),
    CommandSpec::new("help", 2, LS, "server", memory_help).doc(
        "Returns helpful text about the different subcommands.",
        "4.0.0",
    ),
];

static SLOWLOG_SUBS: &[CommandSpec] = &[
    CommandSpec::new("get", -2, ADMIN | LS, "server", slowlog_get)
        .doc("Returns the slow log's entries.", "2.2.12"),
    CommandSpec::new("len", 2, ADMIN | LS, "server", slowlog_len)
        .doc("Returns the number of entries in the slow log.", "2.2.12"),
    CommandSpec::new("reset", 2, ADMIN | LS, "server", slowlog_reset)
        .doc("Clears all entries from the slow log.", "2.2.12"),
    CommandSpec::new("help", 2, LS, "server", slowlog_help)
        .doc("Show helpful text about the different subcommands", "6.2.0"),
];

static LATENCY_SUBS: &[CommandSpec] = &[
    CommandSpec::new("latest", 2, ADM, "server", latency_latest).doc(
        "Returns the latest latency samples for all events.",
        "2.8.13",
    ),
    CommandSpec::new("history", 3, ADM, "server", latency_history)
        .doc("Returns timestamp-latency samples for an event.", "2.8.13"),
    CommandSpec::new("reset", -2, ADM, "server", latency_reset)
        .doc("Resets the latency data for one or more events.", "2.8.13"),
    CommandSpec::new("doctor", 2, ADM, "server", latency_doctor).doc(
        "Returns a human-readable latency analysis report.",
        "2.8.13",
    ),
    CommandSpec::new("graph", 3, ADM, "server", latency::latency_graph)
        .doc("Return a latency graph for the event.", "2.8.13"),
    CommandSpec::new("histogram", -2, ADM, "server", latency::latency_histogram).doc(
        "Return the cumulative distribution of latencies of a subset of commands or all.",
        "7.0.0",
    ),
    CommandSpec::new("help", 2, LS, "server", latency_help).doc(
        "Returns helpful text about the different subcommands.",
        "2.8.13",
    ),
];

/// Containers are dispatched to their subcommands; this runs only for a bare container
/// name, which the arity check already refuses.
fn container(ctx: &mut Ctx) -> CmdResult {
    Err(CmdError::err(format!(
        "wrong number of arguments for '{}' command",
        ctx.spec.name
    )))
}

/// Writes Redis's help reply: the header line then the body, as status strings.
fn help_reply(out: &mut Reply, name: &str, lines: &[&str]) {
    out.array(lines.len() + 3);
    out.simple(&format!(
        "{name} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
    ));
    for l in lines {
        out.simple(l);
    }
    out.simple("HELP");
    out.simple("    Prints this help.");
}

fn dbsize(ctx: &mut Ctx) -> CmdResult {
    let n = ctx.srv.ks.dbsize(ctx.client.db);
    ctx.out.int(n as i64);
    Ok(())
}

/// FLUSHDB/FLUSHALL take an optional SYNC or ASYNC. Both are O(1) on the executor: the
/// tables move to the graveyard and are freed in time-bounded slices.
fn flush_mode(ctx: &Ctx) -> Result<(), CmdError> {
    match ctx.args.len() {
        1 => Ok(()),
        2 if ctx.args.is(1, "SYNC") || ctx.args.is(1, "ASYNC") => Ok(()),
        _ => Err(CmdError::Syntax),
    }
}

fn flushdb(ctx: &mut Ctx) -> CmdResult {
    flush_mode(ctx)?;
    let n = ctx.srv.ks.flush_db(ctx.client.db);
    ctx.dirty(n);
    ctx.out.ok();
    Ok(())
}

fn flushall(ctx: &mut Ctx) -> CmdResult {
    flush_mode(ctx)?;
    let mut n = 0;
    for db in 0..ctx.srv.ks.num_dbs() {
        n += ctx.srv.ks.flush_db(db);
    }
    ctx.dirty(n);
    ctx.srv.save_after_flushall();
    ctx.out.ok();
    Ok(())
}

fn shutdown(ctx: &mut Ctx) -> CmdResult {
    let mut req = ShutdownRequest::Default;
    for i in 1..ctx.args.len() {
        if ctx.args.is(i, "NOSAVE") {
            req = ShutdownRequest::NoSave;
        } else if ctx.args.is(i, "SAVE") {
            req = ShutdownRequest::Save;
        } else if ctx.args.is(i, "NOW") || ctx.args.is(i, "FORCE") || ctx.args.is(i, "ABORT") {
            if ctx.args.is(i, "ABORT") {
                return Err(CmdError::err("No shutdown in progress."));
            }
        } else {
            return Err(CmdError::Syntax);
        }
    }
    // While a script is busy only SHUTDOWN NOSAVE is served: it stops the script, and the
    // server when the script has ended, with no reply (Redis exits from the script).
    let busy = &ctx.srv.scripts.busy;
    if busy.in_busy() {
        if req != ShutdownRequest::NoSave {
            return Err(CmdError::raw(busy.busy_error()));
        }
        busy.shutdown
            .store(true, std::sync::atomic::Ordering::SeqCst);
        busy.kill.store(true, std::sync::atomic::Ordering::SeqCst);
        return Ok(());
    }
    // Save (or not) here, so a failure is this command's reply and the server stays up.
    if ctx.srv.shutdown_save(req).is_err() {
        return Err(CmdError::err("Errors trying to SHUTDOWN. Check logs."));
    }
    ctx.srv.shutdown = Some(ShutdownRequest::NoSave);
    Ok(())
}

fn time(ctx: &mut Ctx) -> CmdResult {
    let us = crate::util::now_us();
    ctx.out.array(2);
    ctx.out.bulk_i64(us.div_euclid(1_000_000));
    ctx.out.bulk_i64(us.rem_euclid(1_000_000));
    Ok(())
}

fn lastsave(ctx: &mut Ctx) -> CmdResult {
    ctx.out.int(ctx.srv.lastsave_s);
    Ok(())
}
