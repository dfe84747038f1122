//! INFO: the sections Redis 7 prints, from the executor's counters, the arena and `/proc`.

use super::*;

/// INFO sections in output order; the flag says whether `INFO` / `INFO default` has it.
pub(super) const INFO_SECTIONS: &[(&str, bool)] = &[
    ("server", true),
    ("clients", true),
    ("memory", true),
    ("persistence", true),
    ("stats", true),
    ("replication", true),
    ("cpu", true),
    ("modules", true),
    ("commandstats", false),
    ("errorstats", true),
    ("latencystats", false),
    ("cluster", true),
    ("keyspace", true),
    // cairn's own, only when asked for by name (Redis has no such section).
    ("tiered", false),
];

pub(super) fn info(ctx: &mut Ctx) -> CmdResult {
    let mut wanted = [false; INFO_SECTIONS.len()];
    if ctx.args.len() == 1 {
        for (w, (_, default)) in wanted.iter_mut().zip(INFO_SECTIONS) {
            *w = *default;
        }
    }
    for i in 1..ctx.args.len() {
        let a = ctx.args.get(i);
        let all = a.eq_ignore_ascii_case(b"all") || a.eq_ignore_ascii_case(b"everything");
        let default = a.eq_ignore_ascii_case(b"default");
        for (w, (name, in_default)) in wanted.iter_mut().zip(INFO_SECTIONS) {
            let by_name_only = *name == "tiered";
            if (all && !by_name_only)
                || (default && *in_default)
                || a.eq_ignore_ascii_case(name.as_bytes())
            {
                *w = true;
            }
        }
        // Redis's alias for the modules section.
        if a.eq_ignore_ascii_case(b"module_list") {
            wanted[7] = true;
        }
    }
    let text = info_text(ctx.srv, &wanted, ctx.now_ms);
    ctx.out.verbatim(text.as_bytes());
    Ok(())
}

/// Builds the INFO text for the selected sections (Redis's layout: `# Title` headers,
/// `field:value` lines, a blank line between sections, CRLF line ends).
pub fn info_text(srv: &mut Server, wanted: &[bool], now_ms: i64) -> String {
    let mut out = String::new();
    for (i, (name, _)) in INFO_SECTIONS.iter().enumerate() {
        if !wanted.get(i).copied().unwrap_or(false) {
            continue;
        }
        if !out.is_empty() {
            out.push_str("\r\n");
        }
        let mut sec = Section(String::new());
        match *name {
            "server" => info_server(srv, &mut sec, now_ms),
            "clients" => info_clients(srv, &mut sec),
            "memory" => info_memory(srv, &mut sec),
            "persistence" => info_persistence(srv, &mut sec),
            "stats" => info_stats(srv, &mut sec),
            "replication" => info_replication(srv, &mut sec),
            "cpu" => info_cpu(&mut sec),
            "modules" => {}
            "commandstats" => {
                for (n, st) in srv.cmdstats.sorted() {
                    let per_call = if st.calls > 0 {
                        st.usec as f64 / st.calls as f64
                    } else {
                        0.0
                    };
                    sec.line(
                        &format!("cmdstat_{n}"),
                        format_args!(
                            "calls={},usec={},usec_per_call={:.2},rejected_calls={},failed_calls={}",
                            st.calls, st.usec, per_call, st.rejected_calls, st.failed_calls
                        ),
                    );
                }
            }
            "errorstats" => {
                for (code, n) in &srv.stats.errors_by_code {
                    sec.line(&format!("errorstat_{code}"), format_args!("count={n}"));
                }
            }
            "latencystats" => super::latency::info_latencystats(srv, &mut sec.0),
            "cluster" => sec.line("cluster_enabled", 0),
            "tiered" => srv.info_tiered(&mut sec.0),
            "keyspace" => {
                for db in 0..srv.ks.num_dbs() {
                    let keys = srv.ks.dbsize(db);
                    if keys == 0 {
                        continue;
                    }
                    let expires = srv.ks.volatile_count(db);
                    let avg_ttl = srv.ks.avg_ttl_ms(db, now_ms);
                    sec.line(
                        &format!("db{db}"),
                        format_args!("keys={keys},expires={expires},avg_ttl={avg_ttl}"),
                    );
                }
            }
            _ => {}
        }
        let title = match *name {
            "cpu" => "CPU".to_string(),
            n => {
                let mut t = n.to_string();
                t[..1].make_ascii_uppercase();
                t
            }
        };
        let _ = write!(out, "# {title}\r\n");
        out.push_str(&sec.0);
    }
    out
}

/// Accumulates `field:value\r\n` lines.
pub(super) struct Section(String);

impl Section {
    fn line(&mut self, k: &str, v: impl std::fmt::Display) {
        let _ = write!(self.0, "{k}:{v}\r\n");
    }
}

/// Redis's bytesToHuman: `919.01K`, `1.00M`, `0B`.
pub fn bytes_to_human(n: u64) -> String {
    const UNITS: [&str; 6] = ["K", "M", "G", "T", "P", "E"];
    if n < 1024 {
        return format!("{n}B");
    }
    let mut v = n as f64 / 1024.0;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    format!("{v:.2}{}", UNITS[u])
}

pub(super) fn uname() -> String {
    // SAFETY: uname fills a zeroed, correctly sized struct; the fields are NUL-terminated.
    unsafe {
        let mut u: libc::utsname = std::mem::zeroed();
        if libc::uname(&mut u) != 0 {
            return "Linux".into();
        }
        let f = |s: &[libc::c_char]| {
            std::ffi::CStr::from_ptr(s.as_ptr())
                .to_string_lossy()
                .into_owned()
        };
        format!("{} {} {}", f(&u.sysname), f(&u.release), f(&u.machine))
    }
}

pub(super) fn info_server(srv: &Server, s: &mut Section, now_ms: i64) {
    let uptime = srv.start_instant.elapsed().as_secs();
    let settings = srv.config.settings();
    s.line(
        "redis_version",
        crate::commands::connection::COMPAT_REDIS_VERSION,
    );
    s.line("cairn_version", env!("CARGO_PKG_VERSION"));
    s.line("redis_git_sha1", "00000000");
    s.line("redis_git_dirty", 0);
    s.line("redis_build_id", build_id());
    s.line("redis_mode", "standalone");
    s.line("os", uname());
    s.line("arch_bits", usize::BITS);
    s.line("monotonic_clock", "POSIX clock_gettime");
    s.line("multiplexing_api", "epoll");
    s.line("atomicvar_api", "c11-builtin");
    s.line("gcc_version", "0.0.0");
    s.line("process_id", std::process::id());
    s.line("process_supervised", "no");
    s.line("run_id", &srv.run_id);
    s.line("tcp_port", srv.tcp_port);
    s.line("server_time_usec", crate::util::now_us());
    s.line("uptime_in_seconds", uptime);
    s.line("uptime_in_days", uptime / 86400);
    s.line("hz", settings.hz);
    s.line("configured_hz", settings.hz);
    s.line("lru_clock", crate::keyspace::lru_clock());
    s.line("executable", &srv.executable);
    s.line(
        "config_file",
        srv.config.config_file.as_deref().unwrap_or(""),
    );
    s.line("io_threads_active", (settings.io_threads > 1) as u8);
    let _ = now_ms;
}

/// A stable id for this build (Redis prints a hash of its build environment).
pub(super) fn build_id() -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in concat!(env!("CARGO_PKG_NAME"), env!("CARGO_PKG_VERSION")).bytes() {
        h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
    }
    format!("{h:016x}")
}

pub(super) fn connected_clients(srv: &Server) -> usize {
    // The client running this command is taken out of `clients` while it runs. Replicas'
    // links are not counted (Redis's connected_clients excludes them).
    srv.clients.iter().flatten().filter(|c| !c.replica).count() + 1
}

pub(super) fn info_clients(srv: &Server, s: &mut Section) {
    let (mut max_in, mut max_out) = (0, 0);
    for c in srv.clients.iter().flatten() {
        max_in = max_in.max(c.qbuf_bytes);
        max_out = max_out.max(c.obuf_bytes);
    }
    s.line("connected_clients", connected_clients(srv));
    s.line("cluster_connections", 0);
    s.line("maxclients", srv.config.settings().maxclients);
    s.line("client_recent_max_input_buffer", max_in);
    s.line("client_recent_max_output_buffer", max_out);
    s.line("blocked_clients", srv.blocking.blocked_clients());
    s.line("tracking_clients", srv.ks.tracking.tracking_clients());
    s.line("clients_in_timeout_table", srv.blocking.timeout_table_len());
}

/// Resident set size from /proc/self/statm (pages × page size).
pub fn rss_bytes() -> u64 {
    let page = page_size();
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|t| t.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map(|pages| pages * page)
        .unwrap_or(0)
}

pub(super) fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as u64
    } else {
        4096
    }
}

pub(super) fn total_system_memory() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let pages = unsafe { libc::sysconf(libc::_SC_PHYS_PAGES) };
    if pages > 0 {
        pages as u64 * page_size()
    } else {
        0
    }
}

/// Memory figures shared by INFO memory and MEMORY STATS.
pub(super) struct MemFigures {
    pub(super) used: u64,
    pub(super) peak: u64,
    pub(super) rss: u64,
    pub(super) overhead: u64,
    pub(super) startup: u64,
    pub(super) dataset: u64,
    pub(super) allocator_active: u64,
}

pub(super) fn mem_figures(srv: &mut Server) -> MemFigures {
    let used = srv.used_memory();
    srv.stats.peak_memory = srv.stats.peak_memory.max(used);
    let startup = crate::commands::executor::BASE_OVERHEAD_BYTES;
    let overhead = (startup + srv.client_buffer_bytes + srv.ks.index_bytes()).min(used);
    MemFigures {
        used,
        peak: srv.stats.peak_memory,
        rss: rss_bytes(),
        overhead,
        startup,
        dataset: used - overhead,
        allocator_active: srv.ks.arena.bump_bytes(),
    }
}

pub(super) fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

pub(super) fn info_memory(srv: &mut Server, s: &mut Section) {
    let m = mem_figures(srv);
    let settings = srv.config.settings();
    let allocated = srv.ks.arena.used_bytes();
    let net_startup = m.used.saturating_sub(m.startup);
    s.line("used_memory", m.used);
    s.line("used_memory_human", bytes_to_human(m.used));
    s.line("used_memory_rss", m.rss);
    s.line("used_memory_rss_human", bytes_to_human(m.rss));
    s.line("used_memory_peak", m.peak);
    s.line("used_memory_peak_human", bytes_to_human(m.peak));
    s.line(
        "used_memory_peak_perc",
        format_args!("{:.2}%", ratio(m.used, m.peak) * 100.0),
    );
    s.line("used_memory_overhead", m.overhead);
    s.line("used_memory_startup", m.startup);
    s.line("used_memory_dataset", m.dataset);
    s.line(
        "used_memory_dataset_perc",
        format_args!("{:.2}%", ratio(m.dataset, net_startup) * 100.0),
    );
    s.line("allocator_allocated", allocated);
    s.line("allocator_active", m.allocator_active);
    s.line("allocator_resident", m.rss);
    let sys = total_system_memory();
    s.line("total_system_memory", sys);
    s.line("total_system_memory_human", bytes_to_human(sys));
    // Lua: EVAL's state and cache, the functions' state and libraries.
    let lua = srv.scripts.lua_bytes() as u64;
    let fns = &srv.scripts.functions;
    let fn_vm = fns.vm_bytes() as u64;
    let fn_bytes = fns.overhead_bytes() as u64;
    let eval_bytes = srv.scripts.body_bytes() as u64;
    s.line("used_memory_lua", lua);
    s.line("used_memory_vm_eval", lua);
    s.line("used_memory_lua_human", bytes_to_human(lua));
    s.line("used_memory_scripts_eval", eval_bytes);
    s.line("number_of_cached_scripts", srv.scripts.cached());
    s.line("number_of_functions", fns.functions.len());
    s.line("number_of_libraries", fns.libraries.len());
    s.line("used_memory_vm_functions", fn_vm);
    s.line("used_memory_vm_total", lua + fn_vm);
    s.line("used_memory_vm_total_human", bytes_to_human(lua + fn_vm));
    s.line("used_memory_functions", fn_bytes);
    s.line("used_memory_scripts", eval_bytes + fn_bytes);
    s.line(
        "used_memory_scripts_human",
        bytes_to_human(eval_bytes + fn_bytes),
    );
    s.line("maxmemory", settings.maxmemory);
    s.line("maxmemory_human", bytes_to_human(settings.maxmemory));
    s.line("maxmemory_policy", settings.maxmemory_policy.name());
    s.line(
        "allocator_frag_ratio",
        format_args!("{:.2}", ratio(m.allocator_active, allocated)),
    );
    s.line(
        "allocator_frag_bytes",
        m.allocator_active.saturating_sub(allocated),
    );
    s.line(
        "allocator_rss_ratio",
        format_args!("{:.2}", ratio(m.rss, m.allocator_active)),
    );
    s.line(
        "allocator_rss_bytes",
        m.rss as i64 - m.allocator_active as i64,
    );
    s.line(
        "rss_overhead_ratio",
        format_args!("{:.2}", ratio(m.rss, m.rss)),
    );
    s.line("rss_overhead_bytes", 0);
    s.line(
        "mem_fragmentation_ratio",
        format_args!("{:.2}", ratio(m.rss, m.used)),
    );
    s.line("mem_fragmentation_bytes", m.rss as i64 - m.used as i64);
    s.line("mem_not_counted_for_evict", 0);
    s.line("mem_replication_backlog", 0);
    s.line("mem_total_replication_buffers", 0);
    s.line("mem_clients_slaves", 0);
    s.line("mem_clients_normal", srv.client_buffer_bytes);
    s.line("mem_cluster_links", 0);
    s.line("mem_aof_buffer", 0);
    s.line("mem_allocator", "cairn-arena");
    s.line("active_defrag_running", 0);
    s.line("lazyfree_pending_objects", srv.ks.lazyfree_pending);
    s.line("lazyfreed_objects", srv.ks.stats.lazyfreed_objects);
    // cairn's own: address space of the arena, and the claims of big request arguments
    // read in place (declared lengths, bounded by the budget; see ARCHITECTURE.md).
    s.line("arena_reserved_bytes", srv.ks.arena.reserved_bytes());
    s.line("arena_headroom_bytes", srv.ks.arena.headroom_bytes());
    s.line("arena_write_reserve_bytes", srv.arena_reserve_bytes());
    s.line("request_args_in_place_bytes", srv.ks.arg_block_bytes);
    s.line(
        "request_args_in_place_budget_bytes",
        srv.arg_block_budget_bytes(),
    );
}

pub(super) fn info_persistence(srv: &Server, s: &mut Section) {
    let st = &srv.snapshot.stats;
    let job = srv.snapshot.job.as_ref();
    s.line("loading", srv.is_loading() as u8);
    s.line("async_loading", 0);
    if let Some(l) = srv.snapshot.loading.as_ref() {
        // Redis's loading_* fields, present only while loading.
        let done = l
            .progress
            .loaded_bytes
            .load(std::sync::atomic::Ordering::Relaxed);
        let elapsed = l.started.elapsed().as_secs_f64();
        let perc = if l.total_bytes > 0 {
            done as f64 * 100.0 / l.total_bytes as f64
        } else {
            0.0
        };
        let eta = if done > 0 {
            ((l.total_bytes.saturating_sub(done)) as f64 * elapsed / done as f64) as u64
        } else {
            1
        };
        s.line("loading_start_time", l.started_ms / 1000);
        s.line("loading_total_bytes", l.total_bytes);
        s.line("loading_rdb_used_mem", 0);
        s.line("loading_loaded_bytes", done);
        s.line("loading_loaded_perc", format!("{perc:.2}"));
        s.line("loading_eta_seconds", eta);
    }
    s.line("current_cow_peak", 0);
    s.line("current_cow_size", 0);
    s.line("current_cow_size_age", 0);
    s.line("current_fork_perc", "0.00");
    s.line("current_save_keys_processed", 0);
    s.line("current_save_keys_total", 0);
    s.line("rdb_changes_since_last_save", srv.dirty);
    s.line("rdb_bgsave_in_progress", srv.snapshot.in_progress() as u8);
    s.line("rdb_last_save_time", srv.lastsave_s);
    s.line(
        "rdb_last_bgsave_status",
        if st.last_bgsave_ok { "ok" } else { "err" },
    );
    s.line("rdb_last_bgsave_time_sec", st.last_bgsave_time_sec);
    s.line(
        "rdb_current_bgsave_time_sec",
        srv.snapshot
            .started()
            .map_or(-1, |t| t.elapsed().as_secs() as i64),
    );
    s.line("rdb_saves", st.saves);
    s.line("rdb_last_cow_size", 0);
    s.line("rdb_last_load_keys_expired", 0);
    s.line("rdb_last_load_keys_loaded", 0);
    // The AOF's fields (Redis's, then cairn's log positions) come from the log itself.
    for (name, value) in srv.aof.info_fields() {
        s.line(name, value);
    }
    s.line("snapshot_mode", st.mode);
    s.line(
        "snapshot_rounds",
        job.map_or(st.rounds, |j| {
            j.progress.passes.load(std::sync::atomic::Ordering::Relaxed) as u64
        }),
    );
    s.line("snapshot_pause_us_max", st.pause_us_max);
    s.line("snapshot_extra_bytes_peak", st.extra_bytes_peak);
    s.line("snapshot_bytes_written", st.bytes_written);
}

pub(super) fn info_stats(srv: &Server, s: &mut Section) {
    let st = &srv.stats;
    let ks = &srv.ks.stats;
    let kbps = |bytes_per_sec: u64| format!("{:.2}", bytes_per_sec as f64 / 1024.0);
    s.line("total_connections_received", st.total_connections_received);
    s.line("total_commands_processed", st.total_commands_processed);
    s.line("instantaneous_ops_per_sec", st.inst_ops.per_sec());
    s.line("total_net_input_bytes", st.net_input_bytes);
    s.line("total_net_output_bytes", st.net_output_bytes);
    s.line(
        "total_net_repl_input_bytes",
        srv.repl
            .net_input_bytes
            .load(std::sync::atomic::Ordering::Relaxed),
    );
    s.line("total_net_repl_output_bytes", st.net_repl_output_bytes);
    s.line(
        "instantaneous_input_kbps",
        kbps(st.inst_net_input.per_sec()),
    );
    s.line(
        "instantaneous_output_kbps",
        kbps(st.inst_net_output.per_sec()),
    );
    s.line("instantaneous_input_repl_kbps", "0.00");
    s.line("instantaneous_output_repl_kbps", "0.00");
    s.line("rejected_connections", st.rejected_connections);
    s.line("sync_full", srv.repl.sync_full);
    s.line("sync_partial_ok", srv.repl.sync_partial_ok);
    s.line("sync_partial_err", srv.repl.sync_partial_err);
    s.line("expired_keys", ks.expired_keys);
    s.line(
        "expired_stale_perc",
        format_args!("{:.2}", ks.expired_stale_perc),
    );
    s.line(
        "expired_time_cap_reached_count",
        ks.expired_time_cap_reached_count,
    );
    s.line(
        "expire_cycle_cpu_milliseconds",
        st.expire_cycle_time_us / 1000,
    );
    s.line("evicted_keys", ks.evicted_keys);
    s.line("evicted_clients", srv.stats.evicted_clients);
    let (exceeded_total_ms, exceeded_current_ms) = st.eviction_exceeded_ms();
    s.line("total_eviction_exceeded_time", exceeded_total_ms);
    s.line("current_eviction_exceeded_time", exceeded_current_ms);
    s.line("keyspace_hits", ks.hits);
    s.line("keyspace_misses", ks.misses);
    s.line("pubsub_channels", srv.pubsub.channels.len());
    s.line("pubsub_patterns", srv.pubsub.patterns.len());
    s.line("pubsubshard_channels", srv.pubsub.shard_channels.len());
    s.line("latest_fork_usec", 0);
    s.line("total_forks", 0);
    s.line("migrate_cached_sockets", 0);
    s.line("slave_expires_tracked_keys", 0);
    // cairn has no active defragmentation (CONFIG SET activedefrag yes is refused):
    // these are true zeros.
    for f in [
        "active_defrag_hits",
        "active_defrag_misses",
        "active_defrag_key_hits",
        "active_defrag_key_misses",
        "total_active_defrag_time",
        "current_active_defrag_time",
    ] {
        s.line(f, 0);
    }
    s.line("tracking_total_keys", srv.ks.tracking.total_keys());
    s.line("tracking_total_items", srv.ks.tracking.total_items());
    s.line("tracking_total_prefixes", srv.ks.tracking.total_prefixes());
    s.line("unexpected_error_replies", 0);
    s.line("total_error_replies", st.total_error_replies);
    s.line("dump_payload_sanitizations", 0);
    s.line(
        "total_reads_processed",
        st.total_reads_processed + st.io_threaded_reads_processed,
    );
    s.line(
        "total_writes_processed",
        st.total_writes_processed + st.io_threaded_writes_processed,
    );
    s.line(
        "client_query_buffer_limit_disconnections",
        st.client_query_buffer_limit_disconnections,
    );
    s.line(
        "client_output_buffer_limit_disconnections",
        st.client_output_buffer_limit_disconnections,
    );
    s.line(
        "io_threaded_reads_processed",
        st.io_threaded_reads_processed,
    );
    s.line(
        "io_threaded_writes_processed",
        st.io_threaded_writes_processed,
    );
    // cairn's reply buffers are never resized (an output queue of owned chunks).
    s.line("reply_buffer_shrinks", 0);
    s.line("reply_buffer_expands", 0);
    s.line("reply_bytes_copied", st.reply_bytes_copied);
    s.line("reply_bytes_referenced", st.reply_bytes_referenced);
    s.line("request_args_in_place", srv.ks.stats.request_args_in_place);
    s.line("request_args_adopted", srv.ks.stats.request_args_adopted);
    s.line(
        "request_args_over_budget",
        srv.ks.stats.request_args_over_budget,
    );
    s.line("arena_oom_refusals", st.arena_oom_refusals);
}

pub(super) fn info_replication(srv: &Server, s: &mut Section) {
    if let Some(fields) = srv.repl_link_info() {
        s.line("role", "slave");
        for (k, v) in fields {
            s.line(k, v);
        }
        s.line(
            "slave_priority",
            srv.config.get_value("replica-priority").unwrap_or("100"),
        );
        s.line(
            "slave_read_only",
            (srv.config.get_value("replica-read-only") != Some("no")) as u8,
        );
        s.line("replica_announced", 1);
    } else {
        s.line("role", "master");
    }
    let replicas = srv.repl_info_lines(crate::util::now_ms());
    s.line("connected_slaves", replicas.len());
    let st = srv.config.settings();
    if st.min_replicas_to_write > 0 && st.min_replicas_max_lag_s > 0 {
        s.line("min_slaves_good_slaves", srv.repl.good_replicas);
    }
    for (i, line) in replicas.iter().enumerate() {
        s.line(&format!("slave{i}"), line);
    }
    s.line("master_failover_state", srv.repl_failover_state());
    s.line("master_replid", &srv.master_replid);
    let replid2 = srv.repl.replid2.as_ref();
    s.line(
        "master_replid2",
        replid2.map_or("0000000000000000000000000000000000000000", |(id, _)| {
            id.as_str()
        }),
    );
    s.line("master_repl_offset", srv.aof.reploff);
    s.line(
        "second_repl_offset",
        replid2.map_or(-1, |&(_, upto)| upto as i64),
    );
    let backlog = srv.repl.backlog.as_ref();
    s.line("repl_backlog_active", backlog.is_some() as u8);
    s.line("repl_backlog_size", srv.config.settings().repl_backlog_size);
    s.line(
        "repl_backlog_first_byte_offset",
        backlog.map_or(0, |b| b.first_offset()),
    );
    s.line("repl_backlog_histlen", backlog.map_or(0, |b| b.histlen()));
}

/// (system, user) CPU seconds of `who` (RUSAGE_SELF, RUSAGE_CHILDREN, RUSAGE_THREAD).
pub(super) fn rusage(who: libc::c_int) -> (String, String) {
    // SAFETY: getrusage fills a zeroed struct of the right type.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        if libc::getrusage(who, &mut ru) != 0 {
            return ("0.000000".into(), "0.000000".into());
        }
        ru
    };
    let tv = |t: libc::timeval| format!("{}.{:06}", t.tv_sec, t.tv_usec);
    (tv(ru.ru_stime), tv(ru.ru_utime))
}

pub(super) fn info_cpu(s: &mut Section) {
    let (sys, user) = rusage(libc::RUSAGE_SELF);
    let (csys, cuser) = rusage(libc::RUSAGE_CHILDREN);
    // INFO runs on the executor thread, which is the main thread's equivalent.
    let (tsys, tuser) = rusage(libc::RUSAGE_THREAD);
    s.line("used_cpu_sys", sys);
    s.line("used_cpu_user", user);
    s.line("used_cpu_sys_children", csys);
    s.line("used_cpu_user_children", cuser);
    s.line("used_cpu_sys_main_thread", tsys);
    s.line("used_cpu_user_main_thread", tuser);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_sizes_match_redis() {
        assert_eq!(bytes_to_human(0), "0B");
        assert_eq!(bytes_to_human(1023), "1023B");
        assert_eq!(bytes_to_human(941064), "919.01K");
        assert_eq!(bytes_to_human(12132352), "11.57M");
        assert_eq!(bytes_to_human(25276502016), "23.54G");
    }
}
