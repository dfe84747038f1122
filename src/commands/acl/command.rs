//! The ACL command (Redis 7.0's acl.c aclCommand): SETUSER, GETUSER, DELUSER, USERS,
//! LIST, WHOAMI, CAT, GENPASS, LOG, DRYRUN, SAVE, LOAD, HELP.

use super::{category_by_name, category_names, Denied, LogContext, CATEGORY_NAMES};
use crate::commands::{CmdError, CmdResult, CommandSpec, Ctx, ADMIN, LOADING, NOSCRIPT, STALE};

const SUB: u32 = NOSCRIPT | LOADING | STALE;
const ADMIN_SUB: u32 = ADMIN | SUB;

pub static COMMANDS: &[CommandSpec] = &[CommandSpec::new("acl", -2, 0, "server", help)
    .doc("A container for Access List Control commands ", "6.0.0")
    .subs(SUBS)];

static SUBS: &[CommandSpec] = &[
    CommandSpec::new("cat", -2, SUB, "server", cat).doc(
        "List the ACL categories or the commands inside a category",
        "6.0.0",
    ),
    CommandSpec::new("deluser", -3, ADMIN_SUB, "server", deluser).doc(
        "Remove the specified ACL users and the associated rules",
        "6.0.0",
    ),
    CommandSpec::new("dryrun", -4, ADMIN_SUB, "server", dryrun).doc(
        "Returns whether the user can execute the given command without executing the command.",
        "7.0.0",
    ),
    CommandSpec::new("genpass", -2, SUB, "server", genpass).doc(
        "Generate a pseudorandom secure password to use for ACL users",
        "6.0.0",
    ),
    CommandSpec::new("getuser", 3, ADMIN_SUB, "server", getuser)
        .doc("Get the rules for a specific ACL user", "6.0.0"),
    CommandSpec::new("help", 2, LOADING | STALE, "server", help)
        .doc("Show helpful text about the different subcommands", "6.0.0"),
    CommandSpec::new("list", 2, ADMIN_SUB, "server", list).doc(
        "List the current ACL rules in ACL config file format",
        "6.0.0",
    ),
    CommandSpec::new("load", 2, ADMIN_SUB, "server", load)
        .doc("Reload the ACLs from the configured ACL file", "6.0.0"),
    CommandSpec::new("log", -2, ADMIN_SUB, "server", log).doc(
        "List latest events denied because of ACLs in place",
        "6.0.0",
    ),
    CommandSpec::new("save", 2, ADMIN_SUB, "server", save).doc(
        "Save the current ACL rules in the configured ACL file",
        "6.0.0",
    ),
    CommandSpec::new("setuser", -3, ADMIN_SUB, "server", setuser).doc(
        "Modify or create the rules for a specific ACL user",
        "6.0.0",
    ),
    CommandSpec::new("users", 2, ADMIN_SUB, "server", users)
        .doc("List the username of all the configured ACL rules", "6.0.0"),
    CommandSpec::new("whoami", 2, SUB, "server", whoami).doc(
        "Return the name of the user associated to the current connection",
        "6.0.0",
    ),
];

/// Redis's `%s` of an argument: up to its first NUL.
fn c_str(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

fn setuser(ctx: &mut Ctx) -> CmdResult {
    let name = ctx.args.get(2).to_vec();
    if super::has_spaces(&name) {
        return Err(CmdError::err(
            "Usernames can't contain spaces or null characters",
        ));
    }
    let ops: Vec<Vec<u8>> = (3..ctx.args.len())
        .map(|i| ctx.args.get(i).to_vec())
        .collect();
    let existing = ctx.srv.acl.slot_of(&name);
    let old_channels = existing.map(|s| ctx.srv.acl.channel_rules(s));
    // Redis's error replies turn newlines into spaces (addReplyErrorSdsSafe).
    let slot = ctx
        .srv
        .acl
        .set_user(&name, &ops)
        .map_err(|e| CmdError::err(e.replace(['\r', '\n'], " ")))?;
    if let Some(old) = old_channels {
        ctx.srv.acl_kill_pubsub_if_needed(ctx.client, slot, old);
    }
    ctx.out.ok();
    Ok(())
}

fn deluser(ctx: &mut Ctx) -> CmdResult {
    if (2..ctx.args.len()).any(|i| ctx.args.get(i) == b"default") {
        return Err(CmdError::err("The 'default' user cannot be removed"));
    }
    let mut slots = Vec::new();
    for i in 2..ctx.args.len() {
        let name = ctx.args.get(i).to_vec();
        if let Some(slot) = ctx.srv.acl.delete_user(&name) {
            slots.push(slot);
        }
    }
    ctx.srv.acl_drop_clients(ctx.client, &slots);
    ctx.out.int(slots.len() as i64);
    Ok(())
}

fn getuser(ctx: &mut Ctx) -> CmdResult {
    let acl = &ctx.srv.acl;
    let Some(u) = acl.user_by_name(ctx.args.get(2)) else {
        ctx.out.null();
        return Ok(());
    };
    let out = &mut ctx.out;
    out.map(6);
    out.bulk_str("flags");
    let mut flags = vec![if u.enabled { "on" } else { "off" }];
    if u.nopass {
        flags.push("nopass");
    }
    match u.sanitize {
        Some(false) => flags.push("skip-sanitize-payload"),
        Some(true) => flags.push("sanitize-payload"),
        None => {}
    }
    out.set(flags.len());
    for f in flags {
        out.bulk_str(f);
    }
    out.bulk_str("passwords");
    out.array(u.passwords.len());
    for p in &u.passwords {
        out.bulk(p);
    }
    selector_fields(acl, out, &u.selectors[0]);
    out.bulk_str("selectors");
    out.array(u.selectors.len() - 1);
    for s in &u.selectors[1..] {
        out.map(3);
        selector_fields(acl, out, s);
    }
    Ok(())
}

/// `commands`, `keys`, `channels` of a selector (GETUSER).
fn selector_fields(acl: &super::Acl, out: &mut crate::protocol::reply::Reply, s: &super::Selector) {
    out.bulk_str("commands");
    out.bulk_str(&acl.describe_commands(s));
    out.bulk_str("keys");
    if s.all_keys {
        out.bulk(b"~*");
    } else {
        let parts: Vec<Vec<u8>> = s.patterns.iter().map(super::Acl::pattern_string).collect();
        out.bulk(&parts.join(&b' '));
    }
    out.bulk_str("channels");
    if s.all_channels {
        out.bulk(b"&*");
    } else {
        let parts: Vec<Vec<u8>> = s
            .channels
            .iter()
            .map(|c| {
                let mut v = b"&".to_vec();
                v.extend_from_slice(c);
                v
            })
            .collect();
        out.bulk(&parts.join(&b' '));
    }
}

fn list(ctx: &mut Ctx) -> CmdResult {
    let acl = &ctx.srv.acl;
    let lines: Vec<Vec<u8>> = acl.users().map(|u| acl.user_line(u)).collect();
    ctx.out.array(lines.len());
    for l in lines {
        ctx.out.bulk(&l);
    }
    Ok(())
}

fn users(ctx: &mut Ctx) -> CmdResult {
    let names: Vec<Vec<u8>> = ctx.srv.acl.users().map(|u| u.name.clone()).collect();
    ctx.out.array(names.len());
    for n in names {
        ctx.out.bulk(&n);
    }
    Ok(())
}

fn whoami(ctx: &mut Ctx) -> CmdResult {
    ctx.out.bulk(&ctx.client.user_name);
    Ok(())
}

fn no_file() -> CmdError {
    CmdError::err("This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration.")
}

fn load(ctx: &mut Ctx) -> CmdResult {
    let Some(path) = ctx.srv.acl_file() else {
        return Err(no_file());
    };
    ctx.srv
        .acl_load(ctx.client, &path)
        .map_err(|e| CmdError::err(e.replace(['\r', '\n'], " ")))?;
    ctx.out.ok();
    Ok(())
}

fn save(ctx: &mut Ctx) -> CmdResult {
    let Some(path) = ctx.srv.acl_file() else {
        return Err(no_file());
    };
    ctx.srv.acl_save(&path).map_err(CmdError::raw)?;
    ctx.out.ok();
    Ok(())
}

fn cat(ctx: &mut Ctx) -> CmdResult {
    if ctx.args.len() == 2 {
        ctx.out.array(CATEGORY_NAMES.len());
        for (n, _) in CATEGORY_NAMES {
            ctx.out.bulk_str(n);
        }
        return Ok(());
    }
    if ctx.args.len() != 3 {
        return Err(subcommand_syntax(ctx));
    }
    let Some(flag) = category_by_name(ctx.args.get(2)) else {
        let arg = ctx.args.get(2);
        let shown = &arg[..arg.len().min(128)];
        return Err(CmdError::err(format!(
            "Unknown category '{}'",
            c_str(shown)
        )));
    };
    let names: Vec<&str> = ctx
        .srv
        .acl
        .commands
        .iter()
        .filter(|c| c.categories & flag != 0)
        .map(|c| c.full_name.as_str())
        .collect();
    ctx.out.array(names.len());
    for n in names {
        ctx.out.bulk_str(n);
    }
    Ok(())
}

/// Redis's addReplySubcommandSyntaxError.
fn subcommand_syntax(ctx: &Ctx) -> CmdError {
    let sub = ctx.args.get(1);
    CmdError::err(format!(
        "unknown subcommand or wrong number of arguments for '{}'. Try ACL HELP.",
        c_str(&sub[..sub.len().min(128)])
    ))
}

/// Random bytes from the kernel (getrandom(2), no file descriptor).
fn random_bytes(buf: &mut [u8]) {
    let mut filled = 0;
    while filled < buf.len() {
        // SAFETY: the pointer and length describe the unfilled tail of `buf`.
        let n =
            unsafe { libc::getrandom(buf[filled..].as_mut_ptr().cast(), buf.len() - filled, 0) };
        if n <= 0 {
            // Interrupted or unavailable: fall back to the time-seeded generator rather
            // than fail (Redis falls back likewise when /dev/urandom cannot be read).
            let mut r = crate::util::Rng::from_time();
            for b in &mut buf[filled..] {
                *b = r.next_u64() as u8;
            }
            return;
        }
        filled += n as usize;
    }
}

fn genpass(ctx: &mut Ctx) -> CmdResult {
    const MAX_BITS: i64 = 4096;
    if ctx.args.len() > 3 {
        return Err(subcommand_syntax(ctx));
    }
    let bits = if ctx.args.len() == 3 {
        crate::util::parse_i64(ctx.args.get(2)).ok_or(CmdError::NotInteger)?
    } else {
        256
    };
    if bits <= 0 || bits > MAX_BITS {
        return Err(CmdError::err(format!("ACL GENPASS argument must be the number of bits for the output password, a positive number up to {MAX_BITS}")));
    }
    let chars = ((bits + 3) / 4) as usize;
    let mut raw = vec![0u8; chars.div_ceil(2)];
    random_bytes(&mut raw);
    let mut hex = Vec::with_capacity(chars + 1);
    for b in raw {
        hex.push(b"0123456789abcdef"[(b >> 4) as usize]);
        hex.push(b"0123456789abcdef"[(b & 15) as usize]);
    }
    hex.truncate(chars);
    ctx.out.bulk(&hex);
    Ok(())
}

fn log(ctx: &mut Ctx) -> CmdResult {
    if ctx.args.len() > 3 {
        return Err(subcommand_syntax(ctx));
    }
    let mut count: i64 = 10;
    if ctx.args.len() == 3 {
        if ctx.args.is(2, "RESET") {
            ctx.srv.acl.log.clear();
            ctx.out.ok();
            return Ok(());
        }
        count = crate::util::parse_i64(ctx.args.get(2)).ok_or(CmdError::NotInteger)?;
        count = count.max(0);
    }
    let n = (count as u64).min(ctx.srv.acl.log.len() as u64) as usize;
    let now = crate::util::now_ms();
    ctx.out.array(n);
    for e in ctx.srv.acl.log.iter().take(n) {
        let out = &mut ctx.out;
        out.map(7);
        out.bulk_str("count");
        out.int(e.count as i64);
        out.bulk_str("reason");
        out.bulk_str(match e.reason {
            Denied::Command => "command",
            Denied::Key => "key",
            Denied::Channel => "channel",
            Denied::Auth => "auth",
        });
        out.bulk_str("context");
        out.bulk_str(match e.context {
            LogContext::Toplevel => "toplevel",
            LogContext::Multi => "multi",
            LogContext::Lua => "lua",
        });
        out.bulk_str("object");
        out.bulk(&e.object);
        out.bulk_str("username");
        out.bulk(&e.username);
        out.bulk_str("age-seconds");
        out.double((now - e.ctime_ms) as f64 / 1000.0);
        out.bulk_str("client-info");
        out.bulk_str(&e.client_info);
    }
    Ok(())
}

fn dryrun(ctx: &mut Ctx) -> CmdResult {
    let Some(slot) = ctx.srv.acl.slot_of(ctx.args.get(2)) else {
        return Err(CmdError::err(format!(
            "User '{}' not found",
            c_str(ctx.args.get(2))
        )));
    };
    let cmd_args = ctx.args.skip(3);
    let Some(top) = ctx.srv.commands.lookup(cmd_args.get(0)) else {
        return Err(CmdError::err(format!(
            "Command '{}' not found",
            c_str(cmd_args.get(0))
        )));
    };
    // As Redis's lookupCommand: a container with a known subcommand is that subcommand;
    // an unknown subcommand is an unknown command.
    let (spec, parent) = if !top.subcommands.is_empty() && cmd_args.len() >= 2 {
        match top
            .subcommands
            .iter()
            .find(|s| s.name.as_bytes().eq_ignore_ascii_case(cmd_args.get(1)))
        {
            Some(s) => (s, Some(top)),
            None => {
                return Err(CmdError::err(format!(
                    "Command '{}' not found",
                    c_str(cmd_args.get(0))
                )))
            }
        }
    } else {
        (top, None)
    };
    let full_name = match parent {
        Some(p) => crate::commands::full_name(p, spec),
        None => spec.name.to_string(),
    };
    if !spec.arity_ok(cmd_args.len()) {
        return Err(CmdError::err(format!(
            "wrong number of arguments for '{full_name}' command"
        )));
    }
    match ctx.srv.acl.check(slot, spec, cmd_args) {
        Ok(()) => ctx.out.ok(),
        Err((reason, pos)) => {
            let text = match reason {
                Denied::Command => {
                    format!("This user has no permissions to run the '{full_name}' command")
                }
                Denied::Key => format!(
                    "This user has no permissions to access the '{}' key",
                    c_str(cmd_args.get(pos))
                ),
                _ => format!(
                    "This user has no permissions to access the '{}' channel",
                    c_str(cmd_args.get(pos))
                ),
            };
            ctx.out.bulk_str(&text);
        }
    }
    Ok(())
}

fn help(ctx: &mut Ctx) -> CmdResult {
    const LINES: &[&str] = &[
        "ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "CAT [<category>]",
        "    List all commands that belong to <category>, or all command categories",
        "    when no category is specified.",
        "DELUSER <username> [<username> ...]",
        "    Delete a list of users.",
        "DRYRUN <username> <command> [<arg> ...]",
        "    Returns whether the user can execute the given command without executing the command.",
        "GETUSER <username>",
        "    Get the user's details.",
        "GENPASS [<bits>]",
        "    Generate a secure 256-bit user password. The optional `bits` argument can",
        "    be used to specify a different size.",
        "LIST",
        "    Show users details in config file format.",
        "LOAD",
        "    Reload users from the ACL file.",
        "LOG [<count> | RESET]",
        "    Show the ACL log entries.",
        "SAVE",
        "    Save the current config to the ACL file.",
        "SETUSER <username> <attribute> [<attribute> ...]",
        "    Create or modify a user with the specified attributes.",
        "USERS",
        "    List all the registered usernames.",
        "WHOAMI",
        "    Return the current connection username.",
        "HELP",
        "    Prints this help.",
    ];
    ctx.out.array(LINES.len());
    for l in LINES {
        ctx.out.simple(l);
    }
    Ok(())
}

/// `@name` list of a command's categories (COMMAND INFO).
pub fn category_list(spec: &CommandSpec) -> Vec<String> {
    category_names(super::categories(spec))
        .map(|n| format!("@{n}"))
        .collect()
}
