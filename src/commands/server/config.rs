//! CONFIG GET / SET / RESETSTAT / REWRITE (the option table itself is `src/config.rs`).

use super::*;

pub(super) fn config_get(ctx: &mut Ctx) -> CmdResult {
    let patterns: Vec<&[u8]> = (2..ctx.args.len()).map(|i| ctx.args.get(i)).collect();
    let found = ctx.srv.config.get_matching(&patterns);
    ctx.out.map(found.len());
    for (name, value) in &found {
        ctx.out.bulk_str(name);
        ctx.out.bulk_str(value);
    }
    Ok(())
}

pub(super) fn config_set(ctx: &mut Ctx) -> CmdResult {
    if !(ctx.args.len() - 2).is_multiple_of(2) {
        return Err(CmdError::Syntax);
    }
    let owned: Vec<String> = (2..ctx.args.len()).map(|i| ctx.args.str(i)).collect();
    let pairs: Vec<(&str, &str)> = owned
        .chunks(2)
        .map(|c| (c[0].as_str(), c[1].as_str()))
        .collect();
    let allow_protected = match ctx.srv.config.get_value("enable-protected-configs") {
        Some("yes") => true,
        Some("local") => ctx.client.is_local(),
        _ => false,
    };
    let before = ctx.srv.config.clone();
    ctx.srv
        .config
        .set_many(&pairs, allow_protected)
        .map_err(CmdError::raw)?;
    // The TLS configuration is built (files read, names checked) before any socket
    // moves, so a bad value changes nothing.
    let tls = match tls_config_if_changed(ctx.srv, &before, &pairs) {
        Ok(t) => t,
        Err(e) => {
            ctx.srv.config = before;
            return Err(e);
        }
    };
    if let Err(e) = rebind_if_changed(ctx.srv, before.settings(), &pairs) {
        ctx.srv.config = before;
        return Err(e);
    }
    if let Some(tls) = tls {
        if let Err(e) = retls(ctx.srv, &before, tls) {
            let new = ctx.srv.config.settings().clone();
            if let Some(l) = ctx.srv.listeners.clone() {
                if new.bind != before.settings().bind || new.port != before.settings().port {
                    let old = before.settings();
                    let _ = l.rebind(&old.bind, old.port, &new.bind, new.port);
                }
            }
            ctx.srv.config = before;
            return Err(e);
        }
    }
    let s = ctx.srv.config.settings();
    crate::log::set_level(&s.loglevel);
    if s.dir != before.settings().dir {
        // As Redis, `dir` is the working directory (files are written relative to it).
        if let Err(e) = std::env::set_current_dir(&s.dir) {
            crate::warning!("Can't chdir to '{}': {e}", s.dir);
        }
    }
    ctx.srv.apply_config();
    if pairs.iter().any(|(n, _)| crate::tls::is_tls_option(n)) {
        ctx.srv.repl_link_config_changed();
    }
    // `requirepass` is the default user's password (Redis's updateRequirePass).
    if pairs
        .iter()
        .any(|(n, _)| n.eq_ignore_ascii_case("requirepass"))
    {
        let pass = ctx.srv.config.settings().requirepass.clone();
        ctx.srv.acl.set_default_password(pass.as_deref());
    }
    ctx.srv.acl.pubsub_default_all =
        ctx.srv.config.get_value("acl-pubsub-default") == Some("allchannels");
    ctx.out.ok();
    Ok(())
}

/// The TLS server configuration a CONFIG SET asks for, built from the new values when a
/// `tls-*` option or `bind` changed (Some(None): TLS listens nowhere now). A value
/// rustls cannot use fails the command with Redis's text; the reason is logged.
#[allow(clippy::type_complexity)]
fn tls_config_if_changed(
    srv: &crate::commands::executor::Server,
    old: &crate::config::Config,
    pairs: &[(&str, &str)],
) -> Result<Option<Option<std::sync::Arc<rustls::ServerConfig>>>, CmdError> {
    let first_tls = pairs.iter().find(|(n, _)| crate::tls::is_tls_option(n));
    let new = srv.config.settings();
    if first_tls.is_none() && new.bind == old.settings().bind {
        return Ok(None);
    }
    let fail = |name: &str, e: String| {
        crate::warning!("Failed to configure TLS: {e}");
        CmdError::raw(format!(
            "ERR CONFIG SET failed (possibly related to argument '{name}') - Unable to update TLS configuration. Check server logs."
        ))
    };
    let name = first_tls.map_or("bind", |(n, _)| n);
    if new.tls_replication {
        crate::tls::client_config(&srv.config).map_err(|e| fail(name, e))?;
    }
    if new.tls_port == 0 {
        return Ok(Some(None));
    }
    crate::tls::server_config(&srv.config)
        .map(|c| Some(Some(c)))
        .map_err(|e| fail(name, e))
}

/// Moves the TLS sockets (when `bind` or `tls-port` changed) and hands new TLS
/// connections the new configuration; open connections keep theirs.
fn retls(
    srv: &mut crate::commands::executor::Server,
    old: &crate::config::Config,
    tls: Option<std::sync::Arc<rustls::ServerConfig>>,
) -> CmdResult {
    let Some(listeners) = srv.listeners.clone() else {
        return Ok(());
    };
    let new = srv.config.settings();
    match listeners.retls(&new.bind, new.tls_port, tls) {
        Ok(()) => Ok(()),
        Err(e) => {
            crate::warning!("Failed to listen on tls-port {}: {e}", new.tls_port);
            // The old sockets and configuration come back.
            let o = old.settings();
            let old_tls = if o.tls_port == 0 {
                None
            } else {
                crate::tls::server_config(old).ok()
            };
            if let Err(e) = listeners.retls(&o.bind, o.tls_port, old_tls) {
                crate::warning!("Could not restore the old TLS listening sockets: {e}");
            }
            Err(CmdError::raw(
                "ERR CONFIG SET failed (possibly related to argument 'tls-port') - Unable to listen on this port. Check server logs.",
            ))
        }
    }
}

/// CONFIG SET bind / port listen on the new addresses at once, as Redis 7 does: the old
/// sockets close, connections already open stay. When the new addresses cannot be bound
/// the old sockets come back and the error names whichever of the two options came first
/// in the command, with Redis's text for it (the caller restores the old values).
pub(super) fn rebind_if_changed(
    srv: &mut crate::commands::executor::Server,
    old: &crate::config::Settings,
    pairs: &[(&str, &str)],
) -> CmdResult {
    let new = srv.config.settings();
    if new.bind == old.bind && new.port == old.port {
        return Ok(());
    }
    let Some(listeners) = srv.listeners.clone() else {
        return Ok(());
    };
    let (binds, port) = (new.bind.clone(), new.port);
    let rebound = listeners.rebind(&binds, port, &old.bind, old.port);
    match rebound {
        Ok(()) => {
            srv.tcp_port = port;
            crate::notice!("Listening on port {port} of {}", binds.join(" "));
            Ok(())
        }
        Err(_) => {
            let first_port = pairs
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case("bind") || n.eq_ignore_ascii_case("port"))
                .is_some_and(|(n, _)| n.eq_ignore_ascii_case("port"));
            let (name, msg) = if first_port {
                ("port", "Unable to listen on this port. Check server logs.")
            } else {
                ("bind", "Failed to bind to specified addresses.")
            };
            Err(CmdError::raw(format!(
                "ERR CONFIG SET failed (possibly related to argument '{name}') - {msg}"
            )))
        }
    }
}

pub(super) fn config_resetstat(ctx: &mut Ctx) -> CmdResult {
    let srv = &mut *ctx.srv;
    srv.stats.reset();
    srv.cmdstats.reset();
    srv.ks.stats = Default::default();
    srv.stats.peak_memory = srv.used_memory();
    ctx.out.ok();
    Ok(())
}

pub(super) fn config_rewrite(ctx: &mut Ctx) -> CmdResult {
    // Without an ACL file the users live in the config file (Redis's
    // rewriteConfigUserOption).
    let users: Vec<Vec<u8>> = if ctx.srv.acl_file().is_some() {
        Vec::new()
    } else {
        let acl = &ctx.srv.acl;
        acl.users().map(|u| acl.user_line(u)).collect()
    };
    ctx.srv.config.rewrite(&users).map_err(CmdError::raw)?;
    crate::notice!("CONFIG REWRITE executed with success.");
    ctx.out.ok();
    Ok(())
}

pub(super) fn config_help(ctx: &mut Ctx) -> CmdResult {
    help_reply(
        &mut ctx.out,
        "CONFIG",
        &[
            "GET <pattern>",
            "    Return parameters matching the glob-like <pattern> and their values.",
            "SET <directive> <value>",
            "    Set the configuration <directive> to <value>.",
            "RESETSTAT",
            "    Reset statistics reported by the INFO command.",
            "REWRITE",
            "    Rewrite the configuration file.",
        ],
    );
    Ok(())
}
