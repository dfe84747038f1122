//! Connection commands: PING, ECHO, HELLO, AUTH, SELECT, QUIT, RESET, CLIENT.

use super::{
    CmdError, CmdResult, CommandSpec, Ctx, ADMIN, FAST, LOADING, MISCONF_REFUSED, NOSCRIPT,
    NO_AUTH, PUBSUB_OK, RUNS_IN_MULTI, STALE,
};
use crate::commands::executor::client::ReplyMode;
use crate::commands::executor::Client;
use crate::protocol::reply::Resp;

/// The Redis version cairn reports to clients (HELLO, INFO redis_version), so client
/// libraries enable the features cairn implements.
pub const COMPAT_REDIS_VERSION: &str = "7.0.15";

const CONN: u32 = NOSCRIPT | LOADING | STALE | FAST;
/// CLIENT's subcommands: as AUTH and HELLO but not `fast` (Redis 7.0).
const CLIENT_SUB: u32 = NOSCRIPT | LOADING | STALE;

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new(
        "ping",
        -1,
        FAST | PUBSUB_OK | MISCONF_REFUSED,
        "connection",
        ping,
    )
    .doc("Returns the server's liveliness response.", "1.0.0"),
    CommandSpec::new("echo", 2, FAST | LOADING | STALE, "connection", echo)
        .doc("Returns the given string.", "1.0.0"),
    CommandSpec::new(
        "hello",
        -1,
        CONN | NO_AUTH | ALLOW_BUSY_FLAG,
        "connection",
        hello,
    )
    .doc("Handshakes with the Redis server.", "6.0.0"),
    CommandSpec::new(
        "auth",
        -2,
        CONN | NO_AUTH | ALLOW_BUSY_FLAG,
        "connection",
        auth,
    )
    .doc("Authenticates the connection.", "1.0.0"),
    CommandSpec::new("select", 2, LOADING | STALE | FAST, "connection", select)
        .doc("Changes the selected database.", "1.0.0"),
    CommandSpec::new(
        "quit",
        -1,
        CONN | NO_AUTH | PUBSUB_OK | ALLOW_BUSY_FLAG | RUNS_IN_MULTI,
        "connection",
        quit,
    )
    .doc("Closes the connection.", "1.0.0"),
    CommandSpec::new(
        "reset",
        1,
        CONN | NO_AUTH | PUBSUB_OK | ALLOW_BUSY_FLAG | RUNS_IN_MULTI,
        "connection",
        reset,
    )
    .doc("Resets the connection.", "6.2.0"),
    CommandSpec::new("client", -2, 0, "connection", client_help)
        .acl(0)
        .doc("A container for client connection commands.", "2.4.0")
        .subs(CLIENT_SUBS),
];

const ALLOW_BUSY_FLAG: u32 = super::ALLOW_BUSY;

static CLIENT_SUBS: &[CommandSpec] = &[
    CommandSpec::new("id", 2, CLIENT_SUB, "connection", client_id)
        .doc("Returns the unique client ID of the connection.", "5.0.0"),
    CommandSpec::new("setname", 3, CLIENT_SUB, "connection", client_setname)
        .doc("Sets the connection name.", "2.6.9"),
    CommandSpec::new("getname", 2, CLIENT_SUB, "connection", client_getname)
        .doc("Returns the name of the connection.", "2.6.9"),
    CommandSpec::new("list", -2, ADMIN | CLIENT_SUB, "connection", client_list)
        .doc("Lists open connections.", "2.4.0"),
    CommandSpec::new("info", 2, CLIENT_SUB, "connection", client_info)
        .doc("Returns information about the connection.", "6.2.0"),
    CommandSpec::new("kill", -3, ADMIN | CLIENT_SUB, "connection", client_kill)
        .doc("Terminates open connections.", "2.4.0"),
    CommandSpec::new(
        "unblock",
        -3,
        ADMIN | CLIENT_SUB,
        "connection",
        client_unblock,
    )
    .doc(
        "Unblocks a client blocked by a blocking command from a different connection.",
        "5.0.0",
    ),
    CommandSpec::new(
        "no-evict",
        3,
        ADMIN | CLIENT_SUB,
        "connection",
        client_no_evict,
    )
    .doc("Sets the client eviction mode of the connection.", "7.0.0"),
    CommandSpec::new("reply", 3, CLIENT_SUB, "connection", client_reply).doc(
        "Instructs the server whether to reply to commands.",
        "3.2.0",
    ),
    CommandSpec::new("help", 2, LOADING | STALE, "connection", client_help).doc(
        "Returns helpful text about the different subcommands.",
        "5.0.0",
    ),
    CommandSpec::new("pause", -3, ADMIN | TRACK, "connection", client_pause)
        .doc("Suspends commands processing.", "2.9.50"),
    CommandSpec::new("unpause", 2, ADMIN | TRACK, "connection", client_unpause)
        .doc("Resumes processing commands from paused clients.", "6.2.0"),
    CommandSpec::new("tracking", -3, TRACK, "connection", client_tracking).doc(
        "Controls server-assisted client-side caching for the connection.",
        "6.0.0",
    ),
    CommandSpec::new("caching", 3, TRACK, "connection", client_caching).doc(
        "Instructs the server whether to track the keys in the next request.",
        "6.0.0",
    ),
    CommandSpec::new("getredir", 2, TRACK, "connection", client_getredir).doc(
        "Returns the client ID to which the connection's tracking notifications are redirected.",
        "6.0.0",
    ),
    CommandSpec::new("trackinginfo", 2, TRACK, "connection", client_trackinginfo).doc(
        "Returns information about server-assisted client-side caching for the connection.",
        "6.2.0",
    ),
];

/// CLIENT TRACKING and friends: as CLIENT's other subcommands, but not `fast` (Redis 7.0).
const TRACK: u32 = NOSCRIPT | LOADING | STALE;

/// CLIENT TRACKING ON|OFF [REDIRECT id] [BCAST] [PREFIX p ...] [OPTIN] [OPTOUT] [NOLOOP],
/// with Redis 7.0's checks in its order.
fn client_tracking(ctx: &mut Ctx) -> CmdResult {
    use crate::keyspace::tracking::{prefix_collision, ClientTracking};
    let mut want = ClientTracking::default();
    let mut redirect_given = false;
    let mut i = 3;
    while i < ctx.args.len() {
        let more = i + 1 < ctx.args.len();
        if ctx.args.is(i, "REDIRECT") && more {
            i += 1;
            if redirect_given {
                return Err(CmdError::err(
                    "A client can only redirect to a single other client",
                ));
            }
            let id = ctx.args.i64(i)?;
            let slot = if id as u64 == ctx.client.id {
                Some(ctx.client.slot)
            } else {
                ctx.srv
                    .clients
                    .iter()
                    .position(|c| c.as_ref().is_some_and(|c| c.id == id as u64))
            };
            match slot {
                Some(slot) if id > 0 => {
                    want.redirect = id as u64;
                    want.redirect_slot = slot;
                }
                _ => {
                    return Err(CmdError::err(
                        "The client ID you want redirect to does not exist",
                    ))
                }
            }
            redirect_given = true;
        } else if ctx.args.is(i, "BCAST") {
            want.bcast = true;
        } else if ctx.args.is(i, "OPTIN") {
            want.optin = true;
        } else if ctx.args.is(i, "OPTOUT") {
            want.optout = true;
        } else if ctx.args.is(i, "NOLOOP") {
            want.noloop = true;
        } else if ctx.args.is(i, "PREFIX") && more {
            i += 1;
            want.prefixes.push(ctx.args.get(i).to_vec());
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    if ctx.args.is(2, "OFF") {
        ctx.srv.tracking_disable(ctx.client);
        ctx.out.ok();
        return Ok(());
    }
    if !ctx.args.is(2, "ON") {
        return Err(CmdError::Syntax);
    }
    if !want.bcast && !want.prefixes.is_empty() {
        return Err(CmdError::err(
            "PREFIX option requires BCAST mode to be enabled",
        ));
    }
    if let Some(old) = &ctx.client.tracking {
        if old.bcast != want.bcast {
            return Err(CmdError::err("You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode."));
        }
    }
    if want.bcast && (want.optin || want.optout) {
        return Err(CmdError::err(
            "OPTIN and OPTOUT are not compatible with BCAST",
        ));
    }
    if want.optin && want.optout {
        return Err(CmdError::err(
            "You can't specify both OPTIN mode and OPTOUT mode",
        ));
    }
    if let Some(old) = &ctx.client.tracking {
        if (want.optin && old.optout) || (want.optout && old.optin) {
            return Err(CmdError::err("You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode."));
        }
    }
    // Prefixes already followed stay followed (Redis adds the new ones to them).
    let mut prefixes = ctx
        .client
        .tracking
        .as_ref()
        .map(|t| t.prefixes.clone())
        .unwrap_or_default();
    if want.bcast {
        if let Some(e) = prefix_collision(&prefixes, &want.prefixes) {
            return Err(CmdError::raw(e));
        }
        let given = if want.prefixes.is_empty() {
            vec![Vec::new()]
        } else {
            std::mem::take(&mut want.prefixes)
        };
        for p in given {
            if !prefixes.contains(&p) {
                prefixes.push(p);
            }
        }
    }
    want.prefixes = prefixes;
    ctx.srv
        .ks
        .tracking
        .enable(ctx.client.id, ctx.client.slot, &want.prefixes);
    ctx.client.tracking = Some(want);
    ctx.out.ok();
    Ok(())
}

/// CLIENT PAUSE timeout-ms [WRITE|ALL]: commands from clients wait (all of them, or
/// those that may write) until the timeout or CLIENT UNPAUSE; expiry and eviction stop
/// meanwhile. A second pause keeps the more restrictive type and the later end.
fn client_pause(ctx: &mut Ctx) -> CmdResult {
    if ctx.args.len() > 4 {
        return Err(CmdError::err(format!(
            "unknown subcommand or wrong number of arguments for '{}'. Try CLIENT HELP.",
            ctx.args.str(1)
        )));
    }
    let mut all = true;
    if ctx.args.len() == 4 {
        if ctx.args.is(3, "WRITE") {
            all = false;
        } else if !ctx.args.is(3, "ALL") {
            return Err(CmdError::err("CLIENT PAUSE mode must be WRITE or ALL"));
        }
    }
    let ms = crate::util::parse_i64(ctx.args.get(2))
        .ok_or_else(|| CmdError::err("timeout is not an integer or out of range"))?;
    if ms < 0 {
        return Err(CmdError::err("timeout is negative"));
    }
    // Redis 7.0 adds the clock without an overflow check: a timeout near i64::MAX
    // wraps to an end in the past, a pause that is over at once. So it does here.
    let end_ms = ms.wrapping_add(crate::util::now_ms());
    ctx.srv.blocking.pause(all, end_ms);
    ctx.out.ok();
    Ok(())
}

fn client_unpause(ctx: &mut Ctx) -> CmdResult {
    ctx.srv.blocking.unpause();
    ctx.out.ok();
    Ok(())
}

/// CLIENT CACHING YES|NO: the next command's reads are tracked (OPTIN) or not (OPTOUT).
fn client_caching(ctx: &mut Ctx) -> CmdResult {
    let Some(t) = ctx.client.tracking.as_mut() else {
        return Err(CmdError::err("CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled"));
    };
    if ctx.args.is(2, "YES") {
        if !t.optin {
            return Err(CmdError::err(
                "CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.",
            ));
        }
    } else if ctx.args.is(2, "NO") {
        if !t.optout {
            return Err(CmdError::err(
                "CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.",
            ));
        }
    } else {
        return Err(CmdError::Syntax);
    }
    t.caching = true;
    ctx.out.ok();
    Ok(())
}

fn client_getredir(ctx: &mut Ctx) -> CmdResult {
    let r = ctx
        .client
        .tracking
        .as_ref()
        .map_or(-1, |t| t.redirect as i64);
    ctx.out.int(r);
    Ok(())
}

fn client_trackinginfo(ctx: &mut Ctx) -> CmdResult {
    let t = ctx.client.tracking.clone();
    let mut flags = vec![if t.is_some() { "on" } else { "off" }];
    if let Some(t) = &t {
        if t.bcast {
            flags.push("bcast");
        }
        if t.optin {
            flags.push("optin");
            if t.caching {
                flags.push("caching-yes");
            }
        }
        if t.optout {
            flags.push("optout");
            if t.caching {
                flags.push("caching-no");
            }
        }
        if t.noloop {
            flags.push("noloop");
        }
        if t.broken_redirect {
            flags.push("broken_redirect");
        }
    }
    ctx.out.map(3);
    ctx.out.bulk_str("flags");
    ctx.out.set(flags.len());
    for f in flags {
        ctx.out.bulk_str(f);
    }
    ctx.out.bulk_str("redirect");
    ctx.out.int(t.as_ref().map_or(-1, |t| t.redirect as i64));
    ctx.out.bulk_str("prefixes");
    // Listed in byte order (Redis keeps them in a radix tree).
    let mut prefixes = t.map(|t| t.prefixes).unwrap_or_default();
    prefixes.sort();
    ctx.out.array(prefixes.len());
    for p in prefixes {
        ctx.out.bulk(&p);
    }
    Ok(())
}

/// CLIENT UNBLOCK id [TIMEOUT|ERROR]: 1 if the client was blocked (it then gets its
/// timeout reply, or an -UNBLOCKED error), 0 otherwise.
fn client_unblock(ctx: &mut Ctx) -> CmdResult {
    let id = ctx.args.i64(2)?;
    if ctx.args.len() > 4 {
        return Err(CmdError::Syntax);
    }
    let error = if ctx.args.len() == 4 {
        if ctx.args.is(3, "ERROR") {
            true
        } else if ctx.args.is(3, "TIMEOUT") {
            false
        } else {
            return Err(CmdError::err(
                "CLIENT UNBLOCK reason should be TIMEOUT or ERROR",
            ));
        }
    } else {
        false
    };
    let done =
        id > 0 && !ctx.srv.tiering_parks(id as u64) && ctx.srv.unblock_with(id as u64, error);
    ctx.out.int(done as i64);
    Ok(())
}

fn ping(ctx: &mut Ctx) -> CmdResult {
    // In the RESP2 subscribed context the reply is a ["pong", arg-or-""] array, as Redis.
    if ctx.client.resp == Resp::V2 && ctx.client.is_pubsub() && ctx.args.len() <= 2 {
        ctx.out.array(2);
        ctx.out.bulk(b"pong");
        let arg: &[u8] = if ctx.args.len() == 2 {
            ctx.args.get(1)
        } else {
            b""
        };
        ctx.out.bulk(arg);
        return Ok(());
    }
    match ctx.args.len() {
        1 => ctx.out.simple("PONG"),
        2 => ctx.out.bulk(ctx.args.get(1)),
        _ => {
            return Err(CmdError::err(
                "wrong number of arguments for 'ping' command",
            ))
        }
    }
    Ok(())
}

fn echo(ctx: &mut Ctx) -> CmdResult {
    ctx.out.bulk(ctx.args.get(1));
    Ok(())
}

/// Authenticates the client as `user` (Redis's ACLAuthenticateUser): true on success;
/// a failure is logged in ACL LOG with the command's name as typed.
fn authenticate(ctx: &mut Ctx, user: &[u8], pass: &[u8]) -> bool {
    match ctx.srv.acl.authenticate(user, pass) {
        Some(slot) => {
            ctx.client.authenticated = true;
            ctx.client.user = slot;
            ctx.client.user_name = user.to_vec();
            true
        }
        None => {
            let context = if ctx.client.multi.is_some() || ctx.srv.in_exec {
                super::acl::LogContext::Multi
            } else {
                super::acl::LogContext::Toplevel
            };
            let object = ctx.args.get(0).to_vec();
            ctx.srv.acl_log(
                ctx.client,
                super::acl::Denied::Auth,
                context,
                object,
                Some(user),
            );
            false
        }
    }
}

const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";

fn hello(ctx: &mut Ctx) -> CmdResult {
    let mut proto = None;
    let mut i = 1;
    if ctx.args.len() >= 2 {
        let v = crate::util::parse_i64(ctx.args.get(1))
            .ok_or_else(|| CmdError::err("Protocol version is not an integer or out of range"))?;
        if !(2..=3).contains(&v) {
            return Err(CmdError::raw("NOPROTO unsupported protocol version"));
        }
        proto = Some(v);
        i = 2;
    }
    // Redis 7.0 applies the options one at a time, in order: a failing AUTH or a bad
    // option stops there, but a SETNAME or AUTH before it stays applied (even a SETNAME
    // before authentication). Only the protocol switch waits for the end.
    while i < ctx.args.len() {
        let more = ctx.args.len() - i - 1;
        if ctx.args.is(i, "AUTH") && more >= 2 {
            let (user, pass) = (ctx.args.get(i + 1), ctx.args.get(i + 2));
            if !authenticate(ctx, user, pass) {
                return Err(CmdError::raw(WRONGPASS));
            }
            i += 3;
        } else if ctx.args.is(i, "SETNAME") && more >= 1 {
            let name = ctx.args.get(i + 1);
            validate_client_name(name)?;
            ctx.client.name = if name.is_empty() {
                None
            } else {
                Some(name.to_vec())
            };
            i += 2;
        } else {
            return Err(CmdError::err(format!(
                "Syntax error in HELLO option '{}'",
                ctx.args.str(i)
            )));
        }
    }
    if !ctx.srv.acl.default_needs_no_auth() && !ctx.client.authenticated {
        // Redis 7.0's text (7.2 added "<proto>" to it).
        return Err(CmdError::raw("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time"));
    }
    if let Some(p) = proto {
        ctx.client.resp = if p == 3 { Resp::V3 } else { Resp::V2 };
        ctx.out.resp = ctx.client.resp;
    }
    ctx.out.map(7);
    ctx.out.bulk_str("server");
    ctx.out.bulk_str("redis");
    ctx.out.bulk_str("version");
    ctx.out.bulk_str(COMPAT_REDIS_VERSION);
    ctx.out.bulk_str("proto");
    ctx.out.int(if ctx.client.resp == Resp::V3 { 3 } else { 2 });
    ctx.out.bulk_str("id");
    ctx.out.int(ctx.client.id as i64);
    ctx.out.bulk_str("mode");
    ctx.out.bulk_str("standalone");
    ctx.out.bulk_str("role");
    ctx.out.bulk_str("master");
    ctx.out.bulk_str("modules");
    ctx.out.array(0);
    Ok(())
}

fn auth(ctx: &mut Ctx) -> CmdResult {
    if ctx.args.len() > 3 {
        return Err(CmdError::Syntax);
    }
    let (user, pass) = if ctx.args.len() == 2 {
        if ctx.srv.acl.default_nopass() {
            return Err(CmdError::err("AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"));
        }
        (&b"default"[..], ctx.args.get(1))
    } else {
        (ctx.args.get(1), ctx.args.get(2))
    };
    if authenticate(ctx, user, pass) {
        ctx.out.ok();
        Ok(())
    } else {
        Err(CmdError::raw(WRONGPASS))
    }
}

fn select(ctx: &mut Ctx) -> CmdResult {
    // Redis parses the index as a long, then checks it fits an int with its own message.
    let idx = crate::util::parse_i64(ctx.args.get(1)).ok_or(CmdError::NotInteger)?;
    if idx < i32::MIN as i64 || idx > i32::MAX as i64 {
        return Err(CmdError::err(
            "value is out of range, value must between -2147483648 and 2147483647",
        ));
    }
    if idx < 0 || idx as usize >= ctx.srv.ks.num_dbs() {
        return Err(CmdError::DbIndexOutOfRange);
    }
    ctx.client.db = idx as usize;
    ctx.out.ok();
    Ok(())
}

fn quit(ctx: &mut Ctx) -> CmdResult {
    ctx.out.ok();
    ctx.client.close_after_reply = true;
    Ok(())
}

fn reset(ctx: &mut Ctx) -> CmdResult {
    super::pubsub::unsubscribe_all(ctx.srv, ctx.client);
    ctx.srv.tracking_disable(ctx.client);
    ctx.client.multi = None;
    super::transactions::unwatch_all(ctx.srv, ctx.client);
    let c = &mut ctx.client;
    c.db = 0;
    c.resp = Resp::V2;
    ctx.out.resp = Resp::V2;
    c.name = None;
    // Redis 7.0 clears OFF and a pending SKIP, but a skip already in force (RESET right
    // after CLIENT REPLY SKIP) still swallows RESET's own reply. No-evict stays set in 7.0
    // (7.2 clears it).
    if c.reply_mode != ReplyMode::Skip {
        c.reply_mode = ReplyMode::On;
    }
    // Back to the default user's state for a new connection (clientSetDefaultAuth).
    c.authenticated = ctx.srv.acl.default_needs_no_auth();
    c.user = super::acl::DEFAULT_USER;
    c.user_name = b"default".to_vec();
    ctx.out.simple("RESET");
    Ok(())
}

fn client_help(ctx: &mut Ctx) -> CmdResult {
    if ctx.args.len() == 1 {
        return Err(CmdError::err(
            "wrong number of arguments for 'client' command",
        ));
    }
    // Redis 7.0's text, line for line: clients and tools show it verbatim.
    let lines = [
        "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "CACHING (YES|NO)",
        "    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
        "GETREDIR",
        "    Return the client ID we are redirecting to when tracking is enabled.",
        "GETNAME",
        "    Return the name of the current connection.",
        "ID",
        "    Return the ID of the current connection.",
        "INFO",
        "    Return information about the current client connection.",
        "KILL <ip:port>",
        "    Kill connection made from <ip:port>.",
        "KILL <option> <value> [<option> <value> [...]]",
        "    Kill connections. Options are:",
        "    * ADDR (<ip:port>|<unixsocket>:0)",
        "      Kill connections made from the specified address",
        "    * LADDR (<ip:port>|<unixsocket>:0)",
        "      Kill connections made to specified local address",
        "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
        "      Kill connections by type.",
        "    * USER <username>",
        "      Kill connections authenticated by <username>.",
        "    * SKIPME (YES|NO)",
        "      Skip killing current connection (default: yes).",
        "LIST [options ...]",
        "    Return information about client connections. Options:",
        "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
        "      Return clients of specified type.",
        "UNPAUSE",
        "    Stop the current client pause, resuming traffic.",
        "PAUSE <timeout> [WRITE|ALL]",
        "    Suspend all, or just write, clients for <timeout> milliseconds.",
        "REPLY (ON|OFF|SKIP)",
        "    Control the replies sent to the current connection.",
        "SETNAME <name>",
        "    Assign the name <name> to the current connection.",
        "UNBLOCK <clientid> [TIMEOUT|ERROR]",
        "    Unblock the specified blocked client.",
        "TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
        "         [OPTIN] [OPTOUT] [NOLOOP]",
        "    Control server assisted client side caching.",
        "TRACKINGINFO",
        "    Report tracking status for the current connection.",
        "NO-EVICT (ON|OFF)",
        "    Protect current client connection from eviction.",
        "HELP",
        "    Prints this help.",
    ];
    ctx.out.array(lines.len());
    for l in lines {
        ctx.out.simple(l);
    }
    Ok(())
}

fn client_id(ctx: &mut Ctx) -> CmdResult {
    ctx.out.int(ctx.client.id as i64);
    Ok(())
}

fn validate_client_name(name: &[u8]) -> CmdResult {
    if name.iter().any(|&c| !(b'!'..=b'~').contains(&c)) {
        return Err(CmdError::err(
            "Client names cannot contain spaces, newlines or special characters.",
        ));
    }
    Ok(())
}

fn client_setname(ctx: &mut Ctx) -> CmdResult {
    let name = ctx.args.get(2);
    validate_client_name(name)?;
    ctx.client.name = if name.is_empty() {
        None
    } else {
        Some(name.to_vec())
    };
    ctx.out.ok();
    Ok(())
}

fn client_getname(ctx: &mut Ctx) -> CmdResult {
    match &ctx.client.name {
        Some(n) => ctx.out.bulk(n),
        None => ctx.out.null(),
    }
    Ok(())
}

/// Every connected client, the current one included, ordered by id.
fn all_clients<'a>(srv_clients: &'a [Option<Box<Client>>], me: &'a Client) -> Vec<&'a Client> {
    let mut v: Vec<&Client> = srv_clients.iter().flatten().map(|b| &**b).collect();
    v.push(me);
    v.sort_by_key(|c| c.id);
    v
}

/// A client type as CLIENT LIST / KILL name it (Redis's getClientTypeByName; `slave` is
/// `replica`).
fn client_class(name: &[u8]) -> Option<&'static str> {
    match name.to_ascii_lowercase().as_slice() {
        b"normal" => Some("normal"),
        b"pubsub" => Some("pubsub"),
        b"replica" | b"slave" => Some("replica"),
        b"master" => Some("master"),
        _ => None,
    }
}

/// Bytes of the caller's running command (its `argv-mem`).
fn own_argv_bytes(ctx: &mut Ctx) {
    ctx.client.argv_bytes = ctx.args.iter().map(|a| a.len() as u64).sum();
}

fn client_list(ctx: &mut Ctx) -> CmdResult {
    own_argv_bytes(ctx);
    let r = client_list_text(ctx);
    ctx.client.argv_bytes = 0;
    r
}

fn client_list_text(ctx: &mut Ctx) -> CmdResult {
    // Redis's forms: no filter, `TYPE <type>` alone, or `ID <id> [<id> ...]` (listed in
    // the order given, repeats included; an id that matches nobody lists nothing).
    let n = ctx.args.len();
    let now = ctx.now_ms;
    let mut text = String::new();
    if n == 4 && ctx.args.is(2, "TYPE") {
        let Some(class) = client_class(ctx.args.get(3)) else {
            return Err(CmdError::err(format!(
                "Unknown client type '{}'",
                c_string(ctx.args.get(3))
            )));
        };
        for c in all_clients(&ctx.srv.clients, ctx.client) {
            if c.class() == class {
                text.push_str(&c.info_line(now));
                text.push('\n');
            }
        }
    } else if n > 3 && ctx.args.is(2, "ID") {
        let mut ids = Vec::with_capacity(n - 3);
        for j in 3..n {
            ids.push(
                crate::util::parse_i64(ctx.args.get(j))
                    .ok_or_else(|| CmdError::err("Invalid client ID"))?,
            );
        }
        let clients = all_clients(&ctx.srv.clients, ctx.client);
        for id in ids {
            if let Some(c) = clients.iter().find(|c| c.id as i64 == id) {
                text.push_str(&c.info_line(now));
                text.push('\n');
            }
        }
    } else if n != 2 {
        return Err(CmdError::Syntax);
    } else {
        for c in all_clients(&ctx.srv.clients, ctx.client) {
            text.push_str(&c.info_line(now));
            text.push('\n');
        }
    }
    ctx.out.verbatim(text.as_bytes());
    Ok(())
}

fn client_info(ctx: &mut Ctx) -> CmdResult {
    own_argv_bytes(ctx);
    let mut line = ctx.client.info_line(ctx.now_ms);
    ctx.client.argv_bytes = 0;
    line.push('\n');
    ctx.out.verbatim(line.as_bytes());
    Ok(())
}

fn client_kill(ctx: &mut Ctx) -> CmdResult {
    // Old form: CLIENT KILL addr:port.
    if ctx.args.len() == 3 {
        let addr = ctx.args.str(2);
        let found = all_clients(&ctx.srv.clients, ctx.client)
            .iter()
            .find(|c| c.addr == addr)
            .map(|c| c.id);
        return match found {
            Some(id) if id == ctx.client.id => {
                ctx.client.close_after_reply = true;
                ctx.out.ok();
                Ok(())
            }
            Some(id) => {
                ctx.srv.kill_queue.push(id);
                ctx.out.ok();
                Ok(())
            }
            None => Err(CmdError::err("No such client")),
        };
    }
    // Filters are parsed pair by pair as Redis does: an error in an earlier pair wins over
    // a dangling last argument (which is a syntax error when reached).
    let (mut id, mut addr, mut laddr, mut skipme) = (None, None, None, true);
    let mut class: Option<&'static str> = None;
    let mut user: Option<Vec<u8>> = None;
    let mut i = 2;
    while i < ctx.args.len() {
        let has_value = i + 1 < ctx.args.len();
        let v = if has_value {
            ctx.args.str(i + 1)
        } else {
            String::new()
        };
        if ctx.args.is(i, "ID") && has_value {
            id = Some(
                crate::util::parse_i64(ctx.args.get(i + 1))
                    .filter(|v| *v > 0)
                    .ok_or_else(|| CmdError::err("client-id should be greater than 0"))?
                    as u64,
            );
        } else if ctx.args.is(i, "ADDR") && has_value {
            addr = Some(v);
        } else if ctx.args.is(i, "LADDR") && has_value {
            laddr = Some(v);
        } else if ctx.args.is(i, "USER") && has_value {
            if ctx.srv.acl.user_by_name(ctx.args.get(i + 1)).is_none() {
                return Err(CmdError::err(format!(
                    "No such user '{}'",
                    c_string(ctx.args.get(i + 1))
                )));
            }
            user = Some(ctx.args.get(i + 1).to_vec());
        } else if ctx.args.is(i, "TYPE") && has_value {
            class = Some(client_class(ctx.args.get(i + 1)).ok_or_else(|| {
                CmdError::err(format!(
                    "Unknown client type '{}'",
                    c_string(ctx.args.get(i + 1))
                ))
            })?);
        } else if ctx.args.is(i, "SKIPME") && has_value {
            skipme = match v.to_ascii_lowercase().as_str() {
                "yes" => true,
                "no" => false,
                _ => return Err(CmdError::Syntax),
            };
        } else {
            return Err(CmdError::Syntax);
        }
        i += 2;
    }
    let me = ctx.client.id;
    let victims: Vec<u64> = all_clients(&ctx.srv.clients, ctx.client)
        .iter()
        .filter(|c| class.is_none_or(|k| k == c.class()))
        .filter(|c| id.is_none_or(|i| c.id == i))
        .filter(|c| addr.as_ref().is_none_or(|a| &c.addr == a))
        .filter(|c| laddr.as_ref().is_none_or(|a| &c.laddr == a))
        .filter(|c| user.as_ref().is_none_or(|u| &c.user_name == u))
        .filter(|c| !(skipme && c.id == me))
        .map(|c| c.id)
        .collect();
    for &v in &victims {
        if v == me {
            ctx.client.close_after_reply = true;
        } else {
            ctx.srv.kill_queue.push(v);
        }
    }
    ctx.out.int(victims.len() as i64);
    Ok(())
}

/// An argument as Redis's `%s` prints it: up to the first NUL byte.
fn c_string(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

fn client_no_evict(ctx: &mut Ctx) -> CmdResult {
    if ctx.args.is(2, "ON") {
        ctx.client.no_evict = true;
    } else if ctx.args.is(2, "OFF") {
        ctx.client.no_evict = false;
    } else {
        return Err(CmdError::Syntax);
    }
    ctx.out.ok();
    Ok(())
}

fn client_reply(ctx: &mut Ctx) -> CmdResult {
    if ctx.args.is(2, "ON") {
        ctx.client.reply_mode = ReplyMode::On;
        ctx.out.ok();
    } else if ctx.args.is(2, "OFF") {
        ctx.client.reply_mode = ReplyMode::Off;
    } else if ctx.args.is(2, "SKIP") {
        // While replies are off, SKIP changes nothing (Redis ignores it).
        if ctx.client.reply_mode != ReplyMode::Off {
            ctx.client.reply_mode = ReplyMode::SkipNext;
        }
    } else {
        return Err(CmdError::Syntax);
    }
    Ok(())
}
