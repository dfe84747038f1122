//! Persistence commands: SAVE and BGSAVE (the snapshot engine is in
//! `src/persistence/snapshot`; LASTSAVE and SHUTDOWN live with the server family).

use super::{CmdError, CmdResult, CommandSpec, Ctx, ADMIN, NOSCRIPT, NO_ASYNC_LOADING, NO_MULTI};

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new(
        "save",
        1,
        ADMIN | NOSCRIPT | NO_ASYNC_LOADING | NO_MULTI,
        "server",
        save,
    )
    .doc("Synchronously saves the database(s) to disk.", "1.0.0"),
    CommandSpec::new(
        "bgsave",
        -1,
        ADMIN | NOSCRIPT | NO_ASYNC_LOADING,
        "server",
        bgsave,
    )
    .doc("Asynchronously saves the database(s) to disk.", "1.0.0"),
];

/// SAVE blocks the server while the arena is written (Redis's semantics); use BGSAVE to
/// keep serving.
fn save(ctx: &mut Ctx) -> CmdResult {
    match ctx.srv.save_now() {
        Ok(()) => {
            ctx.out.ok();
            Ok(())
        }
        Err(e) if ctx.srv.snapshot.in_progress() || ctx.srv.repl.capture_running() => {
            Err(CmdError::err(e))
        }
        // Redis replies a bare `-ERR` when rdbSave fails (details go to the log).
        Err(_) => Err(CmdError::raw("ERR")),
    }
}

/// BGSAVE [SCHEDULE]: starts a live snapshot. While an AOF rewrite runs (it takes its
/// own snapshot; the engine takes one at a time) BGSAVE is refused, or with SCHEDULE
/// started once the rewrite is done, with Redis 7's replies.
fn bgsave(ctx: &mut Ctx) -> CmdResult {
    let schedule = ctx.args.len() == 2 && ctx.args.is(1, "SCHEDULE");
    if ctx.args.len() > 1 && !schedule {
        return Err(CmdError::Syntax);
    }
    // A replica's full sync captures with the same engine (Redis's RDB child either way).
    if ctx.srv.snapshot.in_progress() || ctx.srv.repl.capture_running() {
        return Err(CmdError::err("Background save already in progress"));
    }
    if ctx.srv.aof.rewrite.is_some() {
        if schedule {
            ctx.srv.bgsave_scheduled = true;
            ctx.out.simple("Background saving scheduled");
            return Ok(());
        }
        return Err(CmdError::err(
            "Another child process is active (AOF?): can't BGSAVE right now. Use BGSAVE SCHEDULE in order to schedule a BGSAVE whenever possible.",
        ));
    }
    match ctx.srv.bgsave_start() {
        Ok(()) => {
            ctx.out.simple("Background saving started");
            Ok(())
        }
        Err(_) => Err(CmdError::raw("ERR")),
    }
}
