//! Generic key commands (Redis's `db.c` / `expire.c`): DEL, EXISTS, TYPE, expiry, SCAN...

use super::{CmdResult, CommandSpec, Ctx, FAST, READONLY, WRITE};

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new("del", -2, WRITE, "generic", del)
        .keys(1, -1, 1)
        .doc("Deletes one or more keys.", "1.0.0"),
    CommandSpec::new("unlink", -2, WRITE | FAST, "generic", del)
        .keys(1, -1, 1)
        .doc("Asynchronously deletes one or more keys.", "4.0.0"),
    CommandSpec::new("exists", -2, READONLY | FAST, "generic", exists)
        .keys(1, -1, 1)
        .doc("Determines whether one or more keys exist.", "1.0.0"),
    CommandSpec::new("type", 2, READONLY | FAST, "generic", type_cmd)
        .keys(1, 1, 1)
        .doc("Determines the type of value stored at a key.", "1.0.0"),
];

fn del(ctx: &mut Ctx) -> CmdResult {
    let db = ctx.client.db;
    let mut n = 0;
    for i in 1..ctx.args.len() {
        if ctx.srv.ks.delete(db, ctx.args.get(i), ctx.now_ms) {
            n += 1;
        }
    }
    ctx.dirty(n as u64);
    ctx.out.int(n);
    Ok(())
}

fn exists(ctx: &mut Ctx) -> CmdResult {
    let db = ctx.client.db;
    let mut n = 0;
    for i in 1..ctx.args.len() {
        if ctx
            .srv
            .ks
            .lookup_read(db, ctx.args.get(i), ctx.now_ms)
            .is_some()
        {
            n += 1;
        }
    }
    ctx.out.int(n);
    Ok(())
}

fn type_cmd(ctx: &mut Ctx) -> CmdResult {
    let db = ctx.client.db;
    match ctx.srv.ks.lookup_read(db, ctx.args.get(1), ctx.now_ms) {
        Some(e) => {
            let name = ctx.srv.ks.kind(e).type_name();
            ctx.out.simple(name);
        }
        None => ctx.out.simple("none"),
    }
    Ok(())
}
