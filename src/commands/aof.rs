//! The append-only log's command: BGREWRITEAOF (the log itself is in
//! `src/persistence/aof/`).

use super::{CmdError, CmdResult, CommandSpec, Ctx, ADMIN, NOSCRIPT};

pub static COMMANDS: &[CommandSpec] =
    &[
        CommandSpec::new("bgrewriteaof", 1, ADMIN | NOSCRIPT, "server", bgrewriteaof).doc(
            "Asynchronously rewrites the append-only file to disk.",
            "1.0.0",
        ),
    ];

/// Starts a rewrite; it runs in slices on the executor and finishes on its own (no fork).
fn bgrewriteaof(ctx: &mut Ctx) -> CmdResult {
    crate::persistence::aof::rewrite::start(ctx.srv).map_err(CmdError::raw)?;
    ctx.out
        .simple("Background append only file rewriting started");
    Ok(())
}
