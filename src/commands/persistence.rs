//! Persistence commands: SAVE and BGSAVE (the snapshot engine is in
//! `src/persistence/snapshot`; LASTSAVE and SHUTDOWN live with the server family).

use super::{CmdError, CmdResult, CommandSpec, Ctx, ADMIN, NOSCRIPT, NO_MULTI};

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new("save", 1, ADMIN | NOSCRIPT | NO_MULTI, "server", save)
        .doc("Synchronously saves the database(s) to disk.", "1.0.0"),
    CommandSpec::new("bgsave", -1, ADMIN | NOSCRIPT, "server", bgsave)
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
        Err(e) if ctx.srv.snapshot.in_progress() => Err(CmdError::err(e)),
        // Redis replies a bare `-ERR` when rdbSave fails (details go to the log).
        Err(_) => Err(CmdError::raw("ERR")),
    }
}

/// BGSAVE [SCHEDULE]: starts a live snapshot. With no other kind of background job in
/// cairn, SCHEDULE only matters when a snapshot is already running, where Redis 7.0
/// still answers that a save is in progress.
fn bgsave(ctx: &mut Ctx) -> CmdResult {
    if ctx.args.len() > 1 && !(ctx.args.len() == 2 && ctx.args.is(1, "SCHEDULE")) {
        return Err(CmdError::Syntax);
    }
    if ctx.srv.snapshot.in_progress() {
        return Err(CmdError::err("Background save already in progress"));
    }
    match ctx.srv.bgsave_start() {
        Ok(()) => {
            ctx.out.simple("Background saving started");
            Ok(())
        }
        Err(_) => Err(CmdError::raw("ERR")),
    }
}
