//! Server commands: INFO, CONFIG, DBSIZE, FLUSHDB/FLUSHALL, SHUTDOWN, COMMAND, ...

use super::{
    CmdError, CmdResult, CommandSpec, Ctx, ADMIN, FAST, LOADING, NOSCRIPT, READONLY, STALE, WRITE,
};
use crate::server::ShutdownRequest;

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new("dbsize", 1, READONLY | FAST, "server", dbsize)
        .doc("Returns the number of keys in the database.", "1.0.0"),
    CommandSpec::new("flushdb", -1, WRITE, "server", flushdb)
        .doc("Remove all keys from the current database.", "1.0.0"),
    CommandSpec::new("flushall", -1, WRITE, "server", flushall)
        .doc("Removes all keys from all databases.", "1.0.0"),
    CommandSpec::new(
        "shutdown",
        -1,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "server",
        shutdown,
    )
    .doc(
        "Synchronously saves the database(s) to disk and shuts down the Redis server.",
        "1.0.0",
    ),
];

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
    ctx.srv.shutdown = Some(req);
    Ok(())
}
