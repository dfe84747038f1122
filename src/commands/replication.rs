//! Replication commands (Redis's replication.c): PSYNC, SYNC, REPLCONF, ROLE, WAIT,
//! REPLICAOF / SLAVEOF. The state and the stream are `src/commands/executor/replication.rs`, the
//! link to a primary `src/commands/executor/replica_link.rs`.

use super::{
    CmdError, CmdResult, CommandSpec, Ctx, ADMIN, ALLOW_BUSY, BLOCKING, FAST, LOADING, NOSCRIPT,
    NO_ASYNC_LOADING, NO_MULTI, STALE,
};

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new("psync", -3, ADMIN | NOSCRIPT | NO_ASYNC_LOADING | NO_MULTI, "server", psync)
        .doc("Internal command used for replication", "2.8.0"),
    CommandSpec::new("sync", 1, ADMIN | NOSCRIPT | NO_ASYNC_LOADING | NO_MULTI, "server", sync)
        .doc("Internal command used for replication", "1.0.0"),
    CommandSpec::new(
        "replconf",
        -1,
        ADMIN | NOSCRIPT | LOADING | STALE | ALLOW_BUSY,
        "server",
        replconf,
    )
    .doc(
        "An internal command for configuring the replication stream",
        "3.0.0",
    ),
    CommandSpec::new("role", 1, NOSCRIPT | LOADING | STALE | FAST, "server", role)
        .acl(super::acl::ADMIN | super::acl::DANGEROUS)
        .doc(
        "Return the role of the instance in the context of replication",
        "2.8.12",
    ),
    CommandSpec::new("wait", 3, NOSCRIPT, "generic", wait)
        .acl(super::acl::CONNECTION)
        .doc(
        "Wait for the synchronous replication of all the write commands sent in the context of the current connection",
        "3.0.0",
    ),
    CommandSpec::new("waitaof", 4, BLOCKING, "generic", waitaof)
        .acl(super::acl::CONNECTION)
        .doc(
            "Blocks until all of the preceding write commands sent by the connection are written to the append-only file of the primary and/or replicas.",
            "7.2.0",
        ),
    CommandSpec::new("failover", -1, ADMIN | NOSCRIPT | STALE, "server", failover).doc(
        "Start a coordinated failover between this server and one of its replicas.",
        "6.2.0",
    ),
    CommandSpec::new("replicaof", 3, ADMIN | NOSCRIPT | STALE | NO_ASYNC_LOADING, "server", replicaof).doc(
        "Make the server a replica of another instance, or promote it as master.",
        "5.0.0",
    ),
    CommandSpec::new("slaveof", 3, ADMIN | NOSCRIPT | STALE | NO_ASYNC_LOADING, "server", replicaof).doc(
        "Make the server a replica of another instance, or promote it as master.",
        "1.0.0",
    ),
];

/// Refuses syncs a replica cannot serve (its own link down or failing over, as Redis).
fn may_serve_replica(ctx: &Ctx) -> CmdResult {
    if ctx.srv.repl.failover.is_some() {
        return Err(CmdError::raw("NOMASTERLINK Can't SYNC while failing over"));
    }
    if ctx.srv.repl.link.as_ref().is_some_and(|l| !l.link_up()) {
        return Err(CmdError::raw(
            "NOMASTERLINK Can't SYNC while not connected with my master",
        ));
    }
    Ok(())
}

/// PSYNC <replid> <offset>: `+CONTINUE` with the backlog from `offset` when it still
/// holds it and the id is ours, otherwise a full sync (`+FULLRESYNC <replid> <offset>`
/// once the capture cut, then the RDB, then the stream).
fn psync(ctx: &mut Ctx) -> CmdResult {
    if ctx.client.replica {
        return Ok(()); // Redis ignores SYNC/PSYNC from a client that is already a replica.
    }
    // `PSYNC <replid> <offset> FAILOVER`: our primary hands over to us (its FAILOVER):
    // we turn into a primary first, then answer its PSYNC like any other.
    if ctx.args.len() > 3 && ctx.args.is(3, "failover") {
        if ctx.args.get(1) != ctx.srv.master_replid.as_bytes() {
            return Err(CmdError::err("PSYNC FAILOVER replid must match my replid."));
        }
        let who = ctx.client.info_line(ctx.now_ms);
        ctx.srv
            .repl_unfollow(&format!("failover request from '{who}'"));
    }
    may_serve_replica(ctx)?;
    let id = ctx.args.get(1).to_vec();
    // An offset that is not a number asks for a full sync (Redis's strtoll gives 0,
    // which no backlog holds).
    let offset = crate::util::parse_i64(ctx.args.get(2)).unwrap_or(-1);
    start_sync(ctx, Some((&id, offset)))
}

/// SYNC: the old full sync (the RDB in the `$<len>` form, then the stream).
fn sync(ctx: &mut Ctx) -> CmdResult {
    if ctx.client.replica {
        return Ok(());
    }
    may_serve_replica(ctx)?;
    start_sync(ctx, None)
}

fn start_sync(ctx: &mut Ctx, want: Option<(&[u8], i64)>) -> CmdResult {
    // Redis refuses while the client has replies not yet sent (a pipelined PSYNC); the
    // replica handshake never pipelines.
    if let Some(bytes) = ctx.srv.repl_psync(ctx.client, want) {
        ctx.out.raw(&bytes);
    }
    Ok(())
}

/// The capability a cairn replica whose images this binary can load announces.
fn image_capa() -> &'static str {
    static CAPA: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    CAPA.get_or_init(|| {
        crate::persistence::snapshot::format::Fingerprint::current().replication_capa()
    })
}

/// REPLCONF <option> <value> ...: the replica's handshake settings, and ACK / GETACK.
fn replconf(ctx: &mut Ctx) -> CmdResult {
    if ctx.args.len().is_multiple_of(2) {
        return Err(CmdError::Syntax);
    }
    let mut j = 1;
    while j < ctx.args.len() {
        let (opt, value) = (ctx.args.get(j), ctx.args.get(j + 1));
        if opt.eq_ignore_ascii_case(b"listening-port") {
            let port = crate::util::parse_i64(value)
                .ok_or_else(|| CmdError::err("value is not an integer or out of range"))?;
            ctx.client.repl_listening_port = port.clamp(0, u16::MAX as i64) as u16;
        } else if opt.eq_ignore_ascii_case(b"ip-address") {
            if value.len() >= 256 {
                return Err(CmdError::err(format!(
                    "REPLCONF ip-address provided by replica instance is too long: {} bytes",
                    value.len()
                )));
            }
        } else if opt.eq_ignore_ascii_case(b"capa") {
            // Capabilities this primary does not know are ignored, as Redis.
            if value.eq_ignore_ascii_case(b"eof") {
                ctx.client.repl_capa_eof = true;
            } else if value == image_capa().as_bytes() {
                ctx.client.repl_capa_image = true;
            }
        } else if opt.eq_ignore_ascii_case(b"ack") {
            // No reply, ever (the replica does not read any). `ACK <off> FACK <aofoff>`:
            // the replica's log fsynced `aofoff` (Redis 7.2, for WAITAOF).
            if ctx.client.replica {
                if let Some(off) = crate::util::parse_i64(value).filter(|&o| o >= 0) {
                    let fack = (ctx.args.len() > j + 3 && ctx.args.is(j + 2, "fack"))
                        .then(|| crate::util::parse_i64(ctx.args.get(j + 3)))
                        .flatten()
                        .filter(|&o| o >= 0)
                        .map(|o| o as u64);
                    ctx.srv.repl_ack(ctx.client.id, off as u64, fack);
                }
            }
            return Ok(());
        } else if opt.eq_ignore_ascii_case(b"getack") {
            // From our primary: acknowledge now (the link thread sends the ACK).
            if ctx.client.master {
                ctx.srv.repl_ack_requested();
            }
            return Ok(());
        } else if opt.eq_ignore_ascii_case(b"rdb-only") {
            let v = crate::util::parse_i64(value)
                .ok_or_else(|| CmdError::err("value is not an integer or out of range"))?;
            if !(0..=1).contains(&v) {
                return Err(CmdError::err(
                    "value is out of range, value must between 0 and 1",
                ));
            }
            ctx.client.repl_rdb_only = v == 1;
        } else if opt.eq_ignore_ascii_case(b"rdb-filter-only") {
            return Err(CmdError::err(
                "REPLCONF rdb-filter-only is not supported by cairn yet",
            ));
        } else {
            return Err(CmdError::err(format!(
                "Unrecognized REPLCONF option: {}",
                String::from_utf8_lossy(opt)
            )));
        }
        j += 2;
    }
    ctx.out.ok();
    Ok(())
}

/// ROLE: `master`, the offset, and each online replica (ip, port, acknowledged offset).
fn role(ctx: &mut Ctx) -> CmdResult {
    if let Some((host, port, state, offset)) = ctx.srv.repl_link_role() {
        ctx.out.array(5);
        ctx.out.bulk(b"slave");
        ctx.out.bulk(host.as_bytes());
        ctx.out.int(port as i64);
        ctx.out.bulk(state.as_bytes());
        ctx.out.int(offset);
        return Ok(());
    }
    let offset = ctx.srv.aof.reploff;
    let replicas = ctx.srv.repl_online_replicas();
    ctx.out.array(3);
    ctx.out.bulk(b"master");
    ctx.out.int(offset as i64);
    ctx.out.array(replicas.len());
    for (ip, port, ack) in replicas {
        ctx.out.array(3);
        ctx.out.bulk(ip.as_bytes());
        ctx.out.bulk(port.to_string().as_bytes());
        ctx.out.bulk(ack.to_string().as_bytes());
    }
    Ok(())
}

/// WAIT numreplicas timeout: how many replicas acknowledged this client's last write,
/// waiting up to `timeout` ms (0: forever) for `numreplicas` of them.
fn wait(ctx: &mut Ctx) -> CmdResult {
    if ctx.srv.is_replica_of_someone() {
        return Err(CmdError::err("WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a replica is configured to be writable (which is not the default) writes to replicas are just local and are not propagated."));
    }
    let numreplicas = crate::util::parse_i64(ctx.args.get(1))
        .ok_or_else(|| CmdError::err("value is not an integer or out of range"))?;
    let timeout = crate::util::parse_i64(ctx.args.get(2))
        .ok_or_else(|| CmdError::err("timeout is not an integer or out of range"))?;
    if timeout < 0 {
        return Err(CmdError::err("timeout is negative"));
    }
    let offset = ctx.client.woff;
    let acked = ctx.srv.repl.acked(offset);
    if acked as i64 >= numreplicas || ctx.client.in_exec.is_some() || !ctx.srv.may_block_now() {
        ctx.out.int(acked as i64);
        return Ok(());
    }
    let deadline = if timeout == 0 {
        0
    } else {
        ctx.now_ms.saturating_add(timeout)
    };
    ctx.srv
        .repl_block_wait(ctx.client.id, offset, numreplicas as u64, None, deadline);
    Ok(())
}

/// WAITAOF numlocal numreplicas timeout (Redis 7.2): `[local, replicas]` whose logs
/// fsynced this client's last write, waiting up to `timeout` ms (0: forever) for
/// `numlocal` (0 or 1) and `numreplicas` of them.
fn waitaof(ctx: &mut Ctx) -> CmdResult {
    let numlocal = crate::util::parse_i64(ctx.args.get(1))
        .ok_or_else(|| CmdError::err("value is not an integer or out of range"))?;
    if !(0..=1).contains(&numlocal) {
        return Err(CmdError::err(
            "value is out of range, value must between 0 and 1",
        ));
    }
    let numreplicas = crate::util::parse_i64(ctx.args.get(2))
        .filter(|&n| n >= 0)
        .ok_or_else(|| CmdError::err("value is out of range, must be positive"))?;
    let timeout = crate::util::parse_i64(ctx.args.get(3))
        .ok_or_else(|| CmdError::err("timeout is not an integer or out of range"))?;
    if timeout < 0 {
        return Err(CmdError::err("timeout is negative"));
    }
    let deadline = if timeout == 0 {
        0
    } else {
        ctx.now_ms
            .checked_add(timeout)
            .ok_or_else(|| CmdError::err("timeout is out of range"))?
    };
    if ctx.srv.is_replica_of_someone() {
        return Err(CmdError::err("WAITAOF cannot be used with replica instances. Please also note that writes to replicas are just local and are not propagated."));
    }
    if numlocal > 0 && !ctx.srv.aof.enabled {
        return Err(CmdError::err(
            "WAITAOF cannot be used when numlocal is set but appendonly is disabled.",
        ));
    }
    let offset = ctx.client.woff;
    let acked = ctx.srv.repl.aof_acked(offset);
    let local = (ctx.srv.aof.fsynced_reploff() >= Some(offset)) as i64;
    if (acked as i64 >= numreplicas && local >= numlocal)
        || ctx.client.in_exec.is_some()
        || !ctx.srv.may_block_now()
    {
        ctx.out.array(2);
        ctx.out.int(local);
        ctx.out.int(acked as i64);
        return Ok(());
    }
    ctx.srv.repl_block_wait(
        ctx.client.id,
        offset,
        numreplicas as u64,
        Some(numlocal as u64),
        deadline,
    );
    Ok(())
}

/// REPLICAOF host port: follow that primary; NO ONE: stop following and be a primary,
/// keeping the data.
fn replicaof(ctx: &mut Ctx) -> CmdResult {
    if ctx.srv.repl.failover.is_some() {
        return Err(CmdError::err("REPLICAOF not allowed while failing over."));
    }
    if ctx.args.is(1, "no") && ctx.args.is(2, "one") {
        let who = ctx.client.info_line(ctx.now_ms);
        ctx.srv.repl_unfollow(&format!("user request from '{who}'"));
        ctx.out.ok();
        return Ok(());
    }
    let port = crate::util::parse_i64(ctx.args.get(2))
        .filter(|p| (0..=65535).contains(p))
        .ok_or_else(|| CmdError::err("Invalid master port"))? as u16;
    let host = ctx.args.str(1).to_string();
    if let Some((h, p, _, _)) = ctx.srv.repl_link_role() {
        if h.eq_ignore_ascii_case(&host) && p == port {
            ctx.out.simple("OK Already connected to specified master");
            return Ok(());
        }
    }
    ctx.srv.repl_follow(&host, port).map_err(CmdError::err)?;
    ctx.out.ok();
    Ok(())
}

/// FAILOVER [TO host port] [TIMEOUT ms] [FORCE] | FAILOVER ABORT (Redis 7.0): writes
/// pause until a replica (that one, or the first) acknowledged our whole stream, then
/// this server follows it with `PSYNC .. FAILOVER`, which turns it into the primary.
fn failover(ctx: &mut Ctx) -> CmdResult {
    if ctx.args.len() == 2 && ctx.args.is(1, "abort") {
        if ctx.srv.repl.failover.is_none() {
            return Err(CmdError::err("No failover in progress."));
        }
        ctx.srv.repl_failover_abort("Failover manually aborted");
        ctx.out.ok();
        return Ok(());
    }
    let not_int = || CmdError::err("value is not an integer or out of range");
    let (mut timeout_ms, mut force, mut target) = (0i64, false, None);
    let mut j = 1;
    while j < ctx.args.len() {
        if ctx.args.is(j, "timeout") && j + 1 < ctx.args.len() && timeout_ms == 0 {
            timeout_ms = crate::util::parse_i64(ctx.args.get(j + 1)).ok_or_else(not_int)?;
            if timeout_ms <= 0 {
                return Err(CmdError::err("FAILOVER timeout must be greater than 0"));
            }
            j += 2;
        } else if ctx.args.is(j, "to") && j + 2 < ctx.args.len() && target.is_none() {
            let port = crate::util::parse_i64(ctx.args.get(j + 2)).ok_or_else(not_int)?;
            target = Some((ctx.args.str(j + 1).to_string(), port));
            j += 3;
        } else if ctx.args.is(j, "force") && !force {
            force = true;
            j += 1;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    if ctx.srv.repl.failover.is_some() {
        return Err(CmdError::err("FAILOVER already in progress."));
    }
    if ctx.srv.is_replica_of_someone() {
        return Err(CmdError::err(
            "FAILOVER is not valid when server is a replica.",
        ));
    }
    if ctx.srv.repl.replicas.is_empty() {
        return Err(CmdError::err("FAILOVER requires connected replicas."));
    }
    if force && (timeout_ms == 0 || target.is_none()) {
        return Err(CmdError::err(
            "FAILOVER with force option requires both a timeout and target HOST and IP.",
        ));
    }
    let target = match target {
        Some((host, port)) => {
            // A port no replica can listen on names no replica.
            let online = u16::try_from(port)
                .ok()
                .and_then(|p| ctx.srv.repl_find_replica(&host, p));
            match online {
                None => {
                    return Err(CmdError::err(
                        "FAILOVER target HOST and PORT is not a replica.",
                    ))
                }
                Some(false) => return Err(CmdError::err("FAILOVER target replica is not online.")),
                Some(true) => Some((host, port as u16)),
            }
        }
        None => None,
    };
    let end_ms = if timeout_ms > 0 {
        ctx.now_ms.saturating_add(timeout_ms)
    } else {
        0
    };
    ctx.srv.repl_failover_start(target, end_ms, force);
    ctx.out.ok();
    Ok(())
}
