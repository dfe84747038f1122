//! The append-only log's command: BGREWRITEAOF (the log itself is in
//! `src/persistence/aof/`).

use super::{CmdError, CmdResult, CommandSpec, Ctx, ADMIN, NOSCRIPT, NO_ASYNC_LOADING};

pub static COMMANDS: &[CommandSpec] = &[CommandSpec::new(
    "bgrewriteaof",
    1,
    ADMIN | NOSCRIPT | NO_ASYNC_LOADING,
    "server",
    bgrewriteaof,
)
.doc(
    "Asynchronously rewrites the append-only file to disk.",
    "1.0.0",
)];

/// Starts a rewrite (a snapshot of the arena becomes the new base; no fork), or schedules
/// it behind a running BGSAVE, as Redis.
fn bgrewriteaof(ctx: &mut Ctx) -> CmdResult {
    if crate::commands::executor::aof_rewrite::request(ctx.srv).map_err(CmdError::raw)? {
        ctx.out
            .simple("Background append only file rewriting started");
    } else {
        ctx.out
            .simple("Background append only file rewriting scheduled");
    }
    Ok(())
}
