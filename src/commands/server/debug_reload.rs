//! DEBUG RELOAD and DEBUG LOADAOF: the persistence round trips Redis's test suites use.
//! Both block the executor for the whole save and load, as they do in Redis (they are
//! debugging commands, proportional to the dataset by definition).

use super::*;
use crate::persistence::snapshot::LoadJob;

/// DEBUG RELOAD [MERGE] [NOFLUSH] [NOSAVE]: SAVE (the image, or an RDB with
/// `snapshot-format rdb`), then that file loaded back (an image through the startup
/// loader, `LoadJob` and `Keyspace::from_arena`; an RDB into a fresh arena). Without
/// NOFLUSH the loaded keyspace replaces the current one whole; with NOFLUSH its keys are
/// added to the current one through the RDB codec (MERGE: loaded keys replace existing
/// ones; without MERGE a key present in both refuses the load before anything changed,
/// where Redis would stop the server).
pub(super) fn reload(ctx: &mut Ctx) -> CmdResult {
    let (mut merge, mut flush, mut save) = (false, true, true);
    for i in 2..ctx.args.len() {
        if ctx.args.is(i, "MERGE") {
            merge = true;
        } else if ctx.args.is(i, "NOFLUSH") {
            flush = false;
        } else if ctx.args.is(i, "NOSAVE") {
            save = false;
        } else {
            return Err(CmdError::err(
                "DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options.",
            ));
        }
    }
    // The fork-free snapshot engine reads the live arena: it cannot be replaced while a
    // background save, rewrite or replica capture is copying it.
    if ctx.srv.background_job_active() || ctx.srv.repl.capture_running() {
        return Err(CmdError::err("Background save already in progress"));
    }
    let tiered = ctx.srv.tiering.is_some();
    if tiered {
        // The reloaded cold entries keep pointing at their records in the live tier
        // file (see `load_image`), which holds only while nothing ran between the save
        // and the load and the old keyspace is replaced whole.
        let why = if !save {
            Some("NOSAVE")
        } else if !flush {
            Some("NOFLUSH")
        } else if ctx.srv.config.settings().snapshot_rdb {
            Some("snapshot-format rdb")
        } else if ctx.srv.ks.pinned_blocks() > 0 {
            Some("replies still being written")
        } else {
            None
        };
        if let Some(why) = why {
            return Err(CmdError::err(format!(
                "DEBUG RELOAD with {why} is not supported while tiering is on"
            )));
        }
    }
    if save && ctx.srv.save_now().is_err() {
        return Err(CmdError::raw("ERR"));
    }
    let loaded = load_image(ctx.srv).map_err(|e| {
        crate::warning!("DEBUG RELOAD: {e}");
        CmdError::err("Error trying to load the RDB dump")
    })?;
    let (ks, libs) = loaded;
    // Replies still queued may reference the current arena's blocks (`pin_value`): the
    // arena then stays, and the loaded keys are copied into it after the flush.
    let swap = flush && ctx.srv.ks.pinned_blocks() == 0;
    // Tier places freed by commands before this one, not yet handed back: they are the
    // old dataset's, none of the reloaded stubs (the flush below frees nothing the tier
    // store sees: the old keyspace goes whole).
    let freed = std::mem::take(&mut ctx.srv.ks.tier.freed);
    let rewarmed = std::mem::take(&mut ctx.srv.ks.tier.rewarmed);
    if flush {
        for db in 0..ctx.srv.ks.num_dbs() {
            ctx.srv.ks.flush_db(db);
        }
    }
    let functions = &mut ctx.srv.scripts.functions;
    if !libs.is_empty() || flush {
        // As Redis's emptyData: a flush empties the libraries too; the image's come back.
        if let Err(e) = functions.restore(&libs, flush, merge, 0) {
            crate::warning!("DEBUG RELOAD: function libraries: {e}");
            return Err(CmdError::err("Error trying to load the RDB dump"));
        }
    }
    if swap {
        let mut ks = ks;
        ks.watch = std::mem::take(&mut ctx.srv.ks.watch);
        ks.tracking = std::mem::take(&mut ctx.srv.ks.tracking);
        // INFO's counters (hits, expired keys...) are the server's, not the dataset's.
        ks.stats = std::mem::take(&mut ctx.srv.ks.stats);
        ks.tier.freed = freed;
        // Values the fallback read back are cooled in the reload too (a cooled item is
        // checked against its entry before its copy is dropped).
        ks.tier.rewarmed = rewarmed;
        let old = ctx.srv.install_keyspace(ks);
        // Unmapping a big arena takes time: not on the executor.
        let _ = std::thread::Builder::new()
            .name("cairn-free-old".into())
            .spawn(move || drop(old));
    } else {
        ctx.srv.ks.tier.freed.extend(freed);
        ctx.srv.ks.tier.rewarmed.extend(rewarmed);
        copy_keys(ctx, ks, merge)?;
    }
    crate::warning!("DB reloaded by DEBUG RELOAD");
    ctx.out.ok();
    Ok(())
}

/// Loads what SAVE writes (`dir/image-filename`, or `dir/dbfilename` with
/// `snapshot-format rdb`) and returns the keyspace and the function libraries it holds.
/// With tiering on, the image was just saved by this command with the executor blocked
/// since: its cold entries' stubs are the live ones, so they load as they are
/// (`TierLoad::InPlace`) and stay cold, their records where they were.
fn load_image(srv: &Server) -> Result<(Keyspace, Vec<Vec<u8>>), String> {
    let s = srv.config.settings();
    if s.snapshot_rdb {
        return load_rdb(srv);
    }
    let path = srv.image_path();
    let tier = if srv.tiering.is_some() {
        crate::persistence::snapshot::TierLoad::InPlace
    } else {
        crate::persistence::snapshot::TierLoad::Warm
    };
    let job = LoadJob::start(path.clone(), s.arena_reserve_bytes, 0, tier)
        .map_err(|e| format!("cannot start the image loader: {e}"))?;
    let (arena, header, restored) = job
        .join()?
        .ok_or_else(|| format!("no image at {}", path.display()))?;
    let mut ks = crate::collections::keyspace_from_arena(arena, s.databases)?;
    if let Some(r) = restored {
        ks.tier.cold_entries = r.cold_entries;
        ks.tier.cold_bytes = r.cold_bytes;
    }
    let libs = crate::persistence::rdb_value::read_function_libraries(&header.functions)?;
    Ok((ks, libs))
}

/// `snapshot-format rdb`: `dir/dbfilename` loaded into a fresh arena.
fn load_rdb(srv: &Server) -> Result<(Keyspace, Vec<Vec<u8>>), String> {
    let path = crate::commands::executor::snapshot_ops::rdb_path(srv);
    let s = srv.config.settings();
    let data = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let seed = {
        let mut r = crate::util::Rng::from_time();
        [r.next_u64(), r.next_u64()]
    };
    let arena = crate::arena::Arena::new(s.arena_reserve_bytes, seed).map_err(|e| e.to_string())?;
    let mut ks = crate::collections::new_keyspace(arena, s.databases);
    let st =
        crate::persistence::rdb_file::load_rdb(&data, &mut ks, &srv.config, crate::util::now_ms())
            .map_err(|e| format!("{e} ({})", path.display()))?;
    Ok((ks, st.functions))
}

/// Adds every key of `loaded` to the server's keyspace (NOFLUSH), through the RDB codec
/// (`write_rdb` then `load_rdb`, which skips keys already expired, as Redis's load does).
fn copy_keys(ctx: &mut Ctx, mut loaded: Keyspace, merge: bool) -> CmdResult {
    // Conflicts first, so a refused load changes nothing.
    let mut clashes: Vec<(usize, Vec<u8>)> = Vec::new();
    for db in 0..loaded.num_dbs().min(ctx.srv.ks.num_dbs()) {
        let mut cursor = 0;
        loop {
            cursor = loaded.scan(db, cursor, |e| {
                let key = loaded.key(e);
                if ctx.srv.ks.find_raw(db, key).is_some() {
                    clashes.push((db, key.to_vec()));
                }
            });
            if cursor == 0 {
                break;
            }
        }
    }
    if !clashes.is_empty() && !merge {
        crate::warning!(
            "DEBUG RELOAD NOFLUSH: the image has {} key(s) already in memory (first: '{}'); use MERGE",
            clashes.len(),
            String::from_utf8_lossy(&clashes[0].1)
        );
        return Err(CmdError::err("Error trying to load the RDB dump"));
    }
    let mut rdb = Vec::new();
    crate::persistence::rdb_file::write_rdb(&mut loaded, &mut rdb, &[], 0).map_err(|e| {
        crate::warning!("DEBUG RELOAD: {e}");
        CmdError::err("Error trying to load the RDB dump")
    })?;
    drop(loaded);
    for (db, key) in &clashes {
        if let Some(e) = ctx.srv.ks.find_raw(*db, key) {
            ctx.srv.ks.delete_entry(*db, e);
        }
    }
    let now = ctx.now_ms;
    crate::persistence::rdb_file::load_rdb(&rdb, &mut ctx.srv.ks, &ctx.srv.config, now).map_err(
        |e| {
            crate::warning!("DEBUG RELOAD: {e}");
            CmdError::err("Error trying to load the RDB dump")
        },
    )?;
    Ok(())
}

/// DEBUG LOADAOF: every framed entry handed to the log writer, then the keyspace emptied
/// and the log (base and incremental files, as the manifest lists them) replayed as at
/// startup. The log itself is unchanged: what it holds is what memory holds after.
pub(super) fn loadaof(ctx: &mut Ctx) -> CmdResult {
    if !ctx.srv.aof.enabled {
        // Redis replays whatever `appenddirname` holds even with the log off; cairn has
        // no open layout to read then.
        return Err(CmdError::err("DEBUG LOADAOF needs appendonly yes"));
    }
    if ctx.srv.aof.rewrite.is_some() {
        return Err(CmdError::err(
            "Background append only file rewriting in progress",
        ));
    }
    if ctx.srv.aof.in_exec_block() {
        return Err(CmdError::err("DEBUG LOADAOF inside a transaction"));
    }
    // The replay reads the files: every entry framed so far must have reached them.
    ctx.srv.aof.flush();
    let want = ctx.srv.aof.last_lsn;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let written = |srv: &Server| {
        srv.aof.writer.as_ref().map_or(0, |w| {
            w.shared
                .written_lsn
                .load(std::sync::atomic::Ordering::Acquire)
        })
    };
    while written(ctx.srv) < want {
        if std::time::Instant::now() > deadline || ctx.srv.aof.failed() {
            return Err(CmdError::err(
                "the append only file writer did not write the log in time",
            ));
        }
        ctx.srv.aof.flush();
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    // A base that is an image replaces the arena: queued replies must not reference it.
    if ctx.srv.ks.pinned_blocks() > 0 {
        return Err(CmdError::err(
            "replies referencing the dataset are still being written: try again",
        ));
    }
    let Some(layout) = ctx.srv.aof.layout.clone() else {
        return Err(CmdError::err("DEBUG LOADAOF needs appendonly yes"));
    };
    let truncated = ctx.srv.config.settings().aof_load_truncated;
    for db in 0..ctx.srv.ks.num_dbs() {
        ctx.srv.ks.flush_db(db);
    }
    let (lsn, reploff) = (ctx.srv.aof.last_lsn, ctx.srv.aof.reploff);
    // Who watches and tracks keys is the clients' state, not the dataset's (an image
    // base brings a keyspace of its own).
    let watch = std::mem::take(&mut ctx.srv.ks.watch);
    let tracking = std::mem::take(&mut ctx.srv.ks.tracking);
    // INFO's counters are the server's: the replay neither resets nor adds to them.
    let stats = ctx.srv.ks.stats.clone();
    let r = ctx.srv.replay_log(&layout, truncated);
    ctx.srv.ks.watch = watch;
    ctx.srv.ks.tracking = tracking;
    ctx.srv.ks.stats = stats;
    if let Err(e) = r {
        // As Redis (which exits): memory no longer matches the log.
        crate::warning!("DEBUG LOADAOF: {e}. Exiting.");
        let _ = std::io::Write::flush(&mut std::io::stdout());
        std::process::exit(1);
    }
    // The log goes on from where it was: the replay only re-read it.
    ctx.srv.aof.last_lsn = lsn;
    ctx.srv.aof.reploff = reploff;
    ctx.srv.dirty = 0;
    crate::warning!("Append Only File loaded by DEBUG LOADAOF");
    ctx.out.ok();
    Ok(())
}
