//! MULTI, EXEC, DISCARD, WATCH, UNWATCH (Redis's `multi.c`).
//!
//! Queueing happens in the pipeline (`Server::execute_inner`): while a client is in MULTI,
//! every command but EXEC, DISCARD, MULTI, WATCH, QUIT and RESET is checked (lookup, arity,
//! auth, OOM, MISCONF...) and, if accepted, copied into `Client::multi` and answered
//! `+QUEUED`; a rejected one flags the transaction (EXEC then answers EXECABORT).
//! EXEC re-checks the transaction as a whole (the union of the queued commands' flags:
//! OOM / MISCONF / AOF errors become `-EXECABORT Transaction discarded because of: ...`),
//! then runs the commands back to back on the executor — nothing else runs in between,
//! which is the atomicity — with blocking disabled (a blocking command answers as on
//! timeout). Runtime errors stay in the reply array, nothing is rolled back.
//!
//! The AOF logs the transaction as `MULTI ... EXEC` around the commands that changed data
//! (only when at least one did); replay applies the block whole, and a block torn at the
//! tail of the log is cut (src/persistence/aof/load.rs).
//!
//! WATCH: `Keyspace::watch` maps (db, key) to watching clients; a touched key flags its
//! watchers in O(1). A watched key that expires after WATCH (and was not already expired
//! then) also fails EXEC, as Redis 7.0 (`isWatchedKeyExpired`).

use super::{CmdError, CmdResult, CommandSpec, Ctx};
use super::{
    ALLOW_BUSY, FAST, LOADING, NOSCRIPT, QUEUES_WITHOUT_OOM_CHECK, RUNS_IN_MULTI, SKIP_SLOWLOG,
    STALE, TAKES_QUEUED_FLAGS,
};
use crate::commands::executor::{Client, Server};

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new(
        "multi",
        1,
        NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY | RUNS_IN_MULTI,
        "transactions",
        multi,
    )
    .doc("Starts a transaction.", "1.2.0"),
    CommandSpec::new(
        "exec",
        1,
        NOSCRIPT | LOADING | STALE | SKIP_SLOWLOG | RUNS_IN_MULTI | TAKES_QUEUED_FLAGS,
        "transactions",
        exec,
    )
    .doc("Executes all commands in a transaction.", "1.2.0"),
    CommandSpec::new(
        "discard",
        1,
        NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY | RUNS_IN_MULTI,
        "transactions",
        discard,
    )
    .doc("Discards a transaction.", "2.0.0"),
    CommandSpec::new(
        "watch",
        -2,
        NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY | RUNS_IN_MULTI,
        "transactions",
        watch,
    )
    .keys(1, -1, 1)
    .doc(
        "Monitors changes to keys to determine the execution of a transaction.",
        "2.2.0",
    ),
    CommandSpec::new(
        "unwatch",
        1,
        NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY | QUEUES_WITHOUT_OOM_CHECK,
        "transactions",
        unwatch,
    )
    .doc("Forgets about watched keys of a transaction.", "2.2.0"),
];

pub const EXECABORT: &str = "EXECABORT Transaction discarded because of previous errors.";

fn multi(ctx: &mut Ctx) -> CmdResult {
    if ctx.client.multi.is_some() {
        return Err(CmdError::err("MULTI calls can not be nested"));
    }
    ctx.client.multi = Some(Default::default());
    ctx.out.ok();
    Ok(())
}

fn discard(ctx: &mut Ctx) -> CmdResult {
    if ctx.client.multi.take().is_none() {
        return Err(CmdError::err("DISCARD without MULTI"));
    }
    unwatch_all(ctx.srv, ctx.client);
    ctx.out.ok();
    Ok(())
}

fn watch(ctx: &mut Ctx) -> CmdResult {
    if ctx.client.multi.is_some() {
        return Err(CmdError::err("WATCH inside MULTI is not allowed"));
    }
    let db = ctx.client.db;
    for i in 1..ctx.args.len() {
        let key = ctx.args.get(i);
        if ctx.srv.ks.watch.watch(db, key, ctx.client.id) {
            let expired = ctx
                .srv
                .ks
                .find_raw(db, key)
                .is_some_and(|e| ctx.srv.ks.is_expired(e, ctx.now_ms));
            ctx.client.watched.push((db, key.to_vec(), expired));
        }
    }
    ctx.out.ok();
    Ok(())
}

fn unwatch(ctx: &mut Ctx) -> CmdResult {
    unwatch_all(ctx.srv, ctx.client);
    ctx.out.ok();
    Ok(())
}

/// Forgets every key `client` watches (EXEC, DISCARD, UNWATCH, disconnect, RESET).
pub fn unwatch_all(srv: &mut Server, client: &mut Client) {
    for (db, key, _) in client.watched.drain(..) {
        srv.ks.watch.unwatch(db, &key, client.id);
    }
    srv.ks.watch.clear_dirty(client.id);
}

/// Redis 7.0's isWatchedKeyExpired: a watched key that was alive at WATCH and has
/// expired since (even if nothing deleted it yet) counts as touched.
fn watched_key_expired(srv: &Server, client: &Client, now_ms: i64) -> bool {
    client.watched.iter().any(|(db, key, was_expired)| {
        !was_expired
            && srv
                .ks
                .find_raw(*db, key)
                .is_some_and(|e| srv.ks.is_expired(e, now_ms))
    })
}

fn exec(ctx: &mut Ctx) -> CmdResult {
    let Some(state) = ctx.client.multi.take() else {
        return Err(CmdError::err("EXEC without MULTI"));
    };
    let dirty_cas = ctx.srv.ks.watch.is_dirty(ctx.client.id)
        || watched_key_expired(ctx.srv, ctx.client, ctx.now_ms);
    unwatch_all(ctx.srv, ctx.client);
    if state.error {
        return Err(CmdError::raw(EXECABORT));
    }
    if dirty_cas {
        ctx.out.null_array();
        return Ok(());
    }
    let now_ms = ctx.now_ms;
    let srv = &mut *ctx.srv;
    let client = &mut *ctx.client;
    let out: &mut Vec<u8> = &mut *ctx.out.buf;
    crate::protocol::reply::Reply::new(out, client.resp).array(state.cmds.len());
    let prev_deny = std::mem::replace(&mut srv.blocking.deny, true);
    srv.in_exec = true;
    client.in_exec = Some(state.cmds.len());
    srv.aof.exec_begin();
    let mut hold = 0u64;
    for cmd in &state.cmds {
        let mark = out.len();
        srv.execute_inner(client, cmd.args(), out, now_ms);
        hold = hold.max(srv.aof.hold_lsn);
        if out.get(mark) == Some(&b'-') {
            let end = out[mark..]
                .iter()
                .position(|&b| b == b'\r')
                .map_or(out.len(), |p| mark + p);
            srv.stats.record_error(&out[mark + 1..end]);
        }
    }
    srv.in_exec = false;
    client.in_exec = None;
    // CLIENT LIST shows `cmd=exec` afterwards, as Redis.
    client.last_cmd = "exec";
    client.last_cmd_parent = None;
    srv.blocking.deny = prev_deny;
    // Closes the log's MULTI block (if a command wrote); EXEC's reply waits for it.
    if let Some(lsn) = srv.aof.exec_end(now_ms) {
        if srv.aof.holds_replies() && lsn > srv.aof.release_lsn() {
            hold = hold.max(lsn);
        }
    }
    srv.aof.hold_lsn = hold;
    Ok(())
}

/// Queues a command inside MULTI (the pipeline checked it). False when the transaction's
/// memory bound is reached (the caller flags the transaction).
pub fn queue(client: &mut Client, args: super::Args, flags: u32, max_bytes: usize) -> bool {
    let Some(m) = client.multi.as_mut() else {
        return false;
    };
    let cmd = crate::commands::executor::client::OwnedCommand::from_args(args);
    if m.bytes + cmd.bytes() > max_bytes {
        return false;
    }
    m.bytes += cmd.bytes();
    m.flags |= flags;
    m.cmds.push(cmd);
    true
}
