//! The executor's side of the append-only log: the propagation hook every command passes
//! through (what to log, how long its reply waits under `appendfsync always`), expiry and
//! eviction deletions, and `appendonly` turned on or off by CONFIG SET. The log itself
//! (framing, writer thread, files) is `src/persistence/aof/`.

use super::Server;
use crate::persistence::aof::writer::{FsyncMode, Writer};
use crate::persistence::aof::{io_opts, manifest, storage};

/// Logs the DELs of keys that expiry or eviction removed since the last call.
pub fn log_deletions(srv: &mut Server, now_ms: i64) {
    let Some(q) = srv.ks.deletions.as_mut() else {
        return;
    };
    if q.is_empty() {
        return;
    }
    let dels = std::mem::take(q);
    for (db, key) in dels {
        let lsn = srv.aof.feed(db, &[&b"DEL"[..], &key], now_ms);
        if srv.aof.holds_replies() {
            srv.aof.mark_dirty(db, &key, lsn);
        }
    }
}

/// The propagation hook, called by `Server::execute` after every command (not while
/// loading). `changed`: the command counted a change (`Ctx::dirty`). Logs expiry/eviction
/// deletions, then the command in its deterministic form, and decides how long the reply
/// must wait (`aof.hold_lsn`) under `appendfsync always`. Inside a script the entries are
/// collected (`Aof::script_capture`); after EVAL they are logged in place of EVAL.
pub fn after_command(
    srv: &mut Server,
    spec: &'static crate::commands::CommandSpec,
    is_sub: bool,
    args: crate::commands::Args,
    db: usize,
    changed: bool,
    now_ms: i64,
) {
    srv.aof.hold_lsn = 0;
    let overrides = std::mem::take(&mut srv.aof.command_forms);
    let script = srv.aof.script_effects.take();
    if !srv.aof.propagating() {
        return;
    }
    if srv.aof.script_capture.is_some() {
        log_deletions(srv, now_ms);
        if changed {
            feed_form(srv, spec, is_sub, args, db, now_ms, &overrides);
            let keys: Vec<(usize, Vec<u8>)> =
                crate::commands::propagate::key_indices(spec, args.len())
                    .map(|i| (db, args.get(i).to_vec()))
                    .chain(crate::commands::propagate::extra_written_keys(
                        spec.name, db, args,
                    ))
                    .collect();
            let barrier = !is_sub && crate::commands::propagate::is_barrier(spec.name);
            if let Some(c) = srv.aof.script_capture.as_mut() {
                c.keys.extend(keys);
                c.barrier |= barrier;
            }
        }
        return;
    }
    let before = srv.aof.last_lsn;
    let script_wrote = script.as_ref().is_some_and(|c| !c.entries.is_empty());
    if (changed && script.is_none())
        || script_wrote
        || srv.ks.deletions.as_ref().is_some_and(|d| !d.is_empty())
    {
        srv.aof.exec_open(db, now_ms);
    }
    log_deletions(srv, now_ms);
    let name = spec.name;
    let holds = srv.aof.holds_replies();
    if let Some(cap) = script {
        if let Some(lsn) = log_script(srv, &cap, now_ms) {
            if holds {
                for (d, k) in &cap.keys {
                    srv.aof.mark_dirty(*d, k, lsn);
                }
                if cap.barrier {
                    srv.aof.mark_barrier(lsn);
                }
            }
        }
    } else if changed {
        let lsn = feed_form(srv, spec, is_sub, args, db, now_ms, &overrides);
        let barrier = !is_sub && crate::commands::propagate::is_barrier(name);
        let extra = crate::commands::propagate::extra_written_keys(name, db, args);
        if holds {
            for i in crate::commands::propagate::key_indices(spec, args.len()) {
                srv.aof.mark_dirty(db, args.get(i), lsn);
            }
            for (d, k) in &extra {
                srv.aof.mark_dirty(*d, k, lsn);
            }
            if barrier {
                srv.aof.mark_barrier(lsn);
            }
        }
    }
    if holds {
        let durable = srv.aof.release_lsn();
        let mut h = if srv.aof.last_lsn > before {
            srv.aof.last_lsn
        } else {
            0
        };
        for i in crate::commands::propagate::key_indices(spec, args.len()) {
            h = h.max(srv.aof.key_wait_lsn(db, args.get(i)));
        }
        h = h.max(srv.aof.barrier_wait_lsn());
        // KEYS, SCAN, DBSIZE, RANDOMKEY... see every key: wait for every write. So does a
        // script (its keys are whatever it read).
        if (spec.first_key == 0 && spec.flags & crate::commands::READONLY != 0)
            || crate::commands::propagate::is_script(name)
            || crate::commands::propagate::reads_unnamed_keys(name, args)
        {
            h = h.max(srv.aof.last_lsn);
        }
        srv.aof.hold_lsn = if h > durable { h } else { 0 };
    }
}

/// Logs a command that changed data in its deterministic form (or the forms its handler
/// set). Returns the LSN of its last entry (0 inside a script, where entries are collected).
fn feed_form(
    srv: &mut Server,
    spec: &'static crate::commands::CommandSpec,
    is_sub: bool,
    args: crate::commands::Args,
    db: usize,
    now_ms: i64,
    overrides: &[Vec<Vec<u8>>],
) -> u64 {
    let taken = srv.propagate_as.take();
    if taken.is_none() && overrides.is_empty() && !is_sub {
        if let Some(lsn) = feed_value_by_reference(srv, spec.name, args, db, now_ms) {
            return lsn;
        }
    }
    let form = if let Some(f) = taken {
        Some(f)
    } else if is_sub {
        None
    } else {
        crate::commands::propagate::log_form(&srv.ks, spec.name, db, args)
    };
    match &form {
        _ if !overrides.is_empty() => {
            let mut lsn = 0;
            for v in overrides {
                lsn = srv.aof.feed(db, v, now_ms);
            }
            lsn
        }
        Some(v) => srv.aof.feed(db, v, now_ms),
        None => {
            let argv: Vec<&[u8]> = args.iter().collect();
            srv.aof.feed(db, &argv, now_ms)
        }
    }
}

/// Logs a SET (SETEX, PSETEX, GETSET, SET with options) of a value of at least
/// `LOG_BY_REFERENCE_MIN_BYTES` without copying it: the stored value's block is pinned
/// for the log and the entry refers to it (`Aof::feed_ref`); [`release_log_pins`] unpins
/// it once the writer thread has copied it. None: log it the ordinary way.
fn feed_value_by_reference(
    srv: &mut Server,
    name: &str,
    args: crate::commands::Args,
    db: usize,
    now_ms: i64,
) -> Option<u64> {
    use crate::commands::propagate::{set_form, set_form_argv, SetForm};
    if !matches!(name, "set" | "setex" | "psetex" | "getset") || srv.dataset_swap_pending {
        return None;
    }
    // The value's size first: every small SET (the usual case) leaves here without
    // `set_form`'s option scan and TTL lookup, which `log_form` does again.
    let value_at = if matches!(name, "setex" | "psetex") {
        3
    } else {
        2
    };
    if value_at >= args.len() || !srv.aof.logs_by_reference(args.get(value_at).len()) {
        return None;
    }
    let (form, value_at) = set_form(&srv.ks, name, db, args)?;
    let len = args.get(value_at).len();
    if form == SetForm::Del {
        return None;
    }
    let e = srv.ks.find_raw(db, args.get(1))?;
    let (block, stored_len) = srv.ks.pin_value(e)?;
    if stored_len != len {
        srv.ks.unpin(block);
        return None;
    }
    // The bytes the log refers to are the stored value's, in its pinned block (the
    // argument's own buffer may be a query buffer, reused after this command).
    // SAFETY: `pin_value` just pinned `block`, which holds `len` bytes of the value at
    // `block_ptr`; nothing writes or frees a pinned block.
    let value = unsafe { std::slice::from_raw_parts(srv.ks.block_ptr(block), len) };
    let t = match form {
        SetForm::Pxat(t) => t.to_string().into_bytes(),
        _ => Vec::new(),
    };
    let argv = set_form_argv(&form, args, value_at, value, &t)?;
    let at = if form == SetForm::AsGiven {
        value_at
    } else {
        2
    };
    Some(srv.aof.feed_ref(db, &argv, at, block, now_ms))
}

/// Unpins the blocks of values logged by reference that the writer thread has copied
/// (called at the end of every event-loop turn and from cron).
pub fn release_log_pins(srv: &mut Server) {
    for b in srv.aof.released_pins() {
        srv.ks.unpin(b);
    }
}

/// Logs a script's effects: one entry alone, more wrapped in MULTI/EXEC (unless the
/// script ran inside a transaction, whose block already wraps them). Returns the LSN a
/// reply must wait for (None: the script changed nothing).
fn log_script(
    srv: &mut Server,
    cap: &crate::persistence::aof::ScriptCapture,
    now_ms: i64,
) -> Option<u64> {
    let (first_db, _) = cap.entries.first()?;
    let wrap = cap.entries.len() > 1 && !srv.aof.in_exec_block();
    if wrap {
        srv.aof.feed(*first_db, &[&b"MULTI"[..]], now_ms);
    }
    let mut lsn = 0;
    for (d, argv) in &cap.entries {
        lsn = srv.aof.feed(*d, argv, now_ms);
    }
    if wrap {
        let d = cap.entries.last().map_or(*first_db, |(d, _)| *d);
        lsn = srv.aof.feed(d, &[&b"EXEC"[..]], now_ms);
    }
    Some(lsn)
}

/// After CONFIG SET: fsync mode, watermark, timestamps; `appendonly` turned on or off at
/// runtime (on: a new incremental file plus an immediate rewrite, as Redis's
/// startAppendOnly; off: everything queued is written and synced, then the log closes).
pub fn apply_config(srv: &mut Server) {
    let s = srv.config.settings().clone();
    srv.aof.apply_settings(&s);
    if s.appendonly && !srv.aof.enabled && !srv.loading {
        if let Err(e) = enable_at_runtime(srv, &s) {
            crate::warning!("Can't turn the append only file on: {e}");
        }
    } else if !s.appendonly && srv.aof.enabled {
        super::aof_rewrite::cancel(srv);
        srv.aof.flush();
        if let Some(mut w) = srv.aof.writer.take() {
            w.shutdown();
        }
        srv.aof.enabled = false;
        // Replicas still get expiry and eviction DELs.
        if srv.aof.repl_stream.is_none() {
            srv.ks.deletions = None;
        }
        crate::notice!("Append only file turned off");
    }
}

fn enable_at_runtime(srv: &mut Server, s: &crate::config::Settings) -> Result<(), String> {
    use storage::LogDir;
    let dir = std::path::PathBuf::from(&s.appenddirname);
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let prefix = s.appendfilename.clone();
    let mpath = dir.join(format!("{prefix}.manifest"));
    let mut layout = match std::fs::read(&mpath) {
        Ok(t) => manifest::Layout::parse(&prefix, &t)?,
        Err(_) => manifest::Layout {
            prefix: prefix.clone(),
            ..Default::default()
        },
    };
    let seq = layout.next_incr_seq();
    let name = manifest::Layout::incr_name(&prefix, seq);
    let mut d = storage::FsDir::new(&dir);
    let mut f = d.open_append(&name).map_err(|e| e.to_string())?;
    f.set_len(0).map_err(|e| e.to_string())?;
    layout.incrs.push(manifest::FileInfo { name, seq });
    let w = Writer::start_opts(
        Box::new(d),
        f,
        Some(
            &layout
                .incrs
                .last()
                .map(|f| f.name.clone())
                .unwrap_or_default(),
        ),
        0,
        srv.aof.last_lsn,
        FsyncMode::parse(&s.appendfsync),
        s.aof_disk_min_free,
        io_opts(s),
    )
    .map_err(|e| e.to_string())?;
    w.set_params(
        FsyncMode::parse(&s.appendfsync),
        s.aof_disk_min_free,
        s.aof_disk_min_free_pct,
    );
    srv.aof.writer = Some(w);
    srv.aof.install_waker();
    srv.aof.layout = Some(layout);
    srv.aof.layout_committed = false;
    srv.aof.enabled = true;
    srv.aof.selected_db = None;
    srv.ks.deletions = Some(Vec::new());
    // The new files only become the log when this rewrite commits its manifest (behind a
    // running BGSAVE, when it is done).
    if srv.background_job_active() {
        srv.aof.rewrite_scheduled = true;
        return Ok(());
    }
    super::aof_rewrite::start(srv)
}
