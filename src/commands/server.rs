//! Server commands: INFO, CONFIG, DBSIZE, FLUSHDB/FLUSHALL, SHUTDOWN, TIME, LASTSAVE,
//! COMMAND, MEMORY, SLOWLOG, LATENCY and DEBUG.

use super::{
    CmdError, CmdResult, CommandSpec, Ctx, ADMIN, BLOCKING, FAST, FLAG_NAMES, LOADING, NOSCRIPT,
    PROTECTED, PUBSUB, READONLY, STALE, WRITE,
};
use crate::keyspace::{Keyspace, Kind};
use crate::protocol::reply::Reply;
use crate::server::{Server, ShutdownRequest};
use std::fmt::Write as _;

const ADM: u32 = ADMIN | NOSCRIPT | LOADING | STALE;
const LS: u32 = LOADING | STALE;

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new("dbsize", 1, READONLY | FAST, "server", dbsize)
        .doc("Returns the number of keys in the database.", "1.0.0"),
    CommandSpec::new("flushdb", -1, WRITE, "server", flushdb)
        .doc("Remove all keys from the current database.", "1.0.0"),
    CommandSpec::new("flushall", -1, WRITE, "server", flushall)
        .doc("Removes all keys from all databases.", "1.0.0"),
    CommandSpec::new(
        "shutdown",
        -1,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "server",
        shutdown,
    )
    .doc(
        "Synchronously saves the database(s) to disk and shuts down the Redis server.",
        "1.0.0",
    ),
    CommandSpec::new("info", -1, LS, "server", info).doc(
        "Returns information and statistics about the server.",
        "1.0.0",
    ),
    CommandSpec::new("config", -2, 0, "server", container)
        .doc("A container for server configuration commands.", "2.0.0")
        .subs(CONFIG_SUBS),
    CommandSpec::new("time", 1, LS | FAST, "server", time).doc("Returns the server time.", "2.6.0"),
    CommandSpec::new("lastsave", 1, LS | FAST, "server", lastsave).doc(
        "Returns the Unix timestamp of the last successful save to disk.",
        "1.0.0",
    ),
    CommandSpec::new("command", -1, LS, "server", command_all)
        .doc("Returns detailed information about all commands.", "2.8.13")
        .subs(COMMAND_SUBS),
    CommandSpec::new("memory", -2, 0, "server", container)
        .doc("A container for memory diagnostics commands.", "4.0.0")
        .subs(MEMORY_SUBS),
    CommandSpec::new("slowlog", -2, 0, "server", container)
        .doc("A container for slow log commands.", "2.2.12")
        .subs(SLOWLOG_SUBS),
    CommandSpec::new("latency", -2, 0, "server", container)
        .doc("A container for latency diagnostics commands.", "2.8.13")
        .subs(LATENCY_SUBS),
    CommandSpec::new("debug", -2, ADM | PROTECTED, "server", debug)
        .doc("A container for debugging commands.", "1.0.0"),
];

static CONFIG_SUBS: &[CommandSpec] = &[
    CommandSpec::new("get", -3, ADM, "server", config_get).doc(
        "Returns the effective values of configuration parameters.",
        "2.0.0",
    ),
    CommandSpec::new("set", -4, ADM, "server", config_set)
        .doc("Sets configuration parameters in-flight.", "2.0.0"),
    CommandSpec::new("resetstat", 2, ADM, "server", config_resetstat)
        .doc("Resets the server's statistics.", "2.0.0"),
    CommandSpec::new("rewrite", 2, ADM, "server", config_rewrite)
        .doc("Persists the effective configuration to file.", "2.8.0"),
    CommandSpec::new("help", 2, LS, "server", config_help).doc(
        "Returns helpful text about the different subcommands.",
        "5.0.0",
    ),
];

static COMMAND_SUBS: &[CommandSpec] = &[
    CommandSpec::new("count", 2, LS, "server", command_count)
        .doc("Returns a count of commands.", "2.8.13"),
    CommandSpec::new("info", -2, LS, "server", command_info).doc(
        "Returns information about one, multiple or all commands.",
        "2.8.13",
    ),
    CommandSpec::new("docs", -2, LS, "server", command_docs).doc(
        "Returns documentary information about one, multiple or all commands.",
        "7.0.0",
    ),
    CommandSpec::new("list", -2, LS, "server", command_list)
        .doc("Returns a list of command names.", "7.0.0"),
    CommandSpec::new("getkeys", -3, LS, "server", command_getkeys).doc(
        "Extracts the key names from an arbitrary command.",
        "2.8.13",
    ),
    CommandSpec::new("getkeysandflags", -3, LS, "server", command_getkeys).doc(
        "Extracts the key names and access flags for an arbitrary command.",
        "7.0.0",
    ),
    CommandSpec::new("help", 2, LS, "server", command_help).doc(
        "Returns helpful text about the different subcommands.",
        "5.0.0",
    ),
];

static MEMORY_SUBS: &[CommandSpec] = &[
    CommandSpec::new("usage", -3, READONLY, "server", memory_usage)
        .keys(2, 2, 1)
        .doc("Estimates the memory usage of a key.", "4.0.0"),
    CommandSpec::new("stats", 2, 0, "server", memory_stats)
        .doc("Returns details about memory usage.", "4.0.0"),
    CommandSpec::new("doctor", 2, 0, "server", memory_doctor)
        .doc("Outputs a memory problems report.", "4.0.0"),
    CommandSpec::new("help", 2, LS, "server", memory_help).doc(
        "Returns helpful text about the different subcommands.",
        "4.0.0",
    ),
];

static SLOWLOG_SUBS: &[CommandSpec] = &[
    CommandSpec::new("get", -2, ADMIN | LS, "server", slowlog_get)
        .doc("Returns the slow log's entries.", "2.2.12"),
    CommandSpec::new("len", 2, ADMIN | LS, "server", slowlog_len)
        .doc("Returns the number of entries in the slow log.", "2.2.12"),
    CommandSpec::new("reset", 2, ADMIN | LS, "server", slowlog_reset)
        .doc("Clears all entries from the slow log.", "2.2.12"),
    CommandSpec::new("help", 2, LS, "server", slowlog_help)
        .doc("Show helpful text about the different subcommands", "6.2.0"),
];

static LATENCY_SUBS: &[CommandSpec] = &[
    CommandSpec::new("latest", 2, ADM, "server", latency_latest).doc(
        "Returns the latest latency samples for all events.",
        "2.8.13",
    ),
    CommandSpec::new("history", 3, ADM, "server", latency_history)
        .doc("Returns timestamp-latency samples for an event.", "2.8.13"),
    CommandSpec::new("reset", -2, ADM, "server", latency_reset)
        .doc("Resets the latency data for one or more events.", "2.8.13"),
    CommandSpec::new("doctor", 2, ADM, "server", latency_doctor).doc(
        "Returns a human-readable latency analysis report.",
        "2.8.13",
    ),
    CommandSpec::new("help", 2, LS, "server", latency_help).doc(
        "Returns helpful text about the different subcommands.",
        "2.8.13",
    ),
];

/// Containers are dispatched to their subcommands; this runs only for a bare container
/// name, which the arity check already refuses.
fn container(ctx: &mut Ctx) -> CmdResult {
    Err(CmdError::err(format!(
        "wrong number of arguments for '{}' command",
        ctx.spec.name
    )))
}

/// Writes Redis's help reply: the header line then the body, as status strings.
fn help_reply(out: &mut Reply, name: &str, lines: &[&str]) {
    out.array(lines.len() + 3);
    out.simple(&format!(
        "{name} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
    ));
    for l in lines {
        out.simple(l);
    }
    out.simple("HELP");
    out.simple("    Prints this help.");
}

fn dbsize(ctx: &mut Ctx) -> CmdResult {
    let n = ctx.srv.ks.dbsize(ctx.client.db);
    ctx.out.int(n as i64);
    Ok(())
}

/// FLUSHDB/FLUSHALL take an optional SYNC or ASYNC. Both are O(1) on the executor: the
/// tables move to the graveyard and are freed in time-bounded slices.
fn flush_mode(ctx: &Ctx) -> Result<(), CmdError> {
    match ctx.args.len() {
        1 => Ok(()),
        2 if ctx.args.is(1, "SYNC") || ctx.args.is(1, "ASYNC") => Ok(()),
        _ => Err(CmdError::Syntax),
    }
}

fn flushdb(ctx: &mut Ctx) -> CmdResult {
    flush_mode(ctx)?;
    let n = ctx.srv.ks.flush_db(ctx.client.db);
    ctx.dirty(n);
    ctx.out.ok();
    Ok(())
}

fn flushall(ctx: &mut Ctx) -> CmdResult {
    flush_mode(ctx)?;
    let mut n = 0;
    for db in 0..ctx.srv.ks.num_dbs() {
        n += ctx.srv.ks.flush_db(db);
    }
    ctx.dirty(n);
    ctx.out.ok();
    Ok(())
}

fn shutdown(ctx: &mut Ctx) -> CmdResult {
    let mut req = ShutdownRequest::Default;
    for i in 1..ctx.args.len() {
        if ctx.args.is(i, "NOSAVE") {
            req = ShutdownRequest::NoSave;
        } else if ctx.args.is(i, "SAVE") {
            req = ShutdownRequest::Save;
        } else if ctx.args.is(i, "NOW") || ctx.args.is(i, "FORCE") || ctx.args.is(i, "ABORT") {
            if ctx.args.is(i, "ABORT") {
                return Err(CmdError::err("No shutdown in progress."));
            }
        } else {
            return Err(CmdError::Syntax);
        }
    }
    // Save (or not) here, so a failure is this command's reply and the server stays up.
    if ctx.srv.shutdown_save(req).is_err() {
        return Err(CmdError::err("Errors trying to SHUTDOWN. Check logs."));
    }
    ctx.srv.shutdown = Some(ShutdownRequest::NoSave);
    Ok(())
}

// ---- INFO ---------------------------------------------------------------------------

/// INFO sections in output order; the flag says whether `INFO` / `INFO default` has it.
const INFO_SECTIONS: &[(&str, bool)] = &[
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
    ("cluster", true),
    ("keyspace", true),
];

fn info(ctx: &mut Ctx) -> CmdResult {
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
            if all || (default && *in_default) || a.eq_ignore_ascii_case(name.as_bytes()) {
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
            "cluster" => sec.line("cluster_enabled", 0),
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
struct Section(String);

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

fn uname() -> String {
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

fn info_server(srv: &Server, s: &mut Section, now_ms: i64) {
    let uptime = srv.start_instant.elapsed().as_secs();
    let settings = srv.config.settings();
    s.line("redis_version", super::connection::COMPAT_REDIS_VERSION);
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
fn build_id() -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in concat!(env!("CARGO_PKG_NAME"), env!("CARGO_PKG_VERSION")).bytes() {
        h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
    }
    format!("{h:016x}")
}

fn connected_clients(srv: &Server) -> usize {
    // The client running this command is taken out of `clients` while it runs.
    srv.clients.iter().flatten().count() + 1
}

fn info_clients(srv: &Server, s: &mut Section) {
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
    s.line("tracking_clients", 0);
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

fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as u64
    } else {
        4096
    }
}

fn total_system_memory() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let pages = unsafe { libc::sysconf(libc::_SC_PHYS_PAGES) };
    if pages > 0 {
        pages as u64 * page_size()
    } else {
        0
    }
}

/// Memory figures shared by INFO memory and MEMORY STATS.
struct MemFigures {
    used: u64,
    peak: u64,
    rss: u64,
    overhead: u64,
    startup: u64,
    dataset: u64,
    allocator_active: u64,
}

fn mem_figures(srv: &mut Server) -> MemFigures {
    let used = srv.used_memory();
    srv.stats.peak_memory = srv.stats.peak_memory.max(used);
    let startup = crate::server::BASE_OVERHEAD_BYTES;
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

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

fn info_memory(srv: &mut Server, s: &mut Section) {
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
    // No scripting engine yet: nothing is held for Lua or functions.
    s.line("used_memory_lua", 0);
    s.line("used_memory_vm_eval", 0);
    s.line("used_memory_lua_human", "0B");
    s.line("used_memory_scripts_eval", 0);
    s.line("number_of_cached_scripts", 0);
    s.line("number_of_functions", 0);
    s.line("number_of_libraries", 0);
    s.line("used_memory_vm_functions", 0);
    s.line("used_memory_vm_total", 0);
    s.line("used_memory_vm_total_human", "0B");
    s.line("used_memory_functions", 0);
    s.line("used_memory_scripts", 0);
    s.line("used_memory_scripts_human", "0B");
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

fn info_persistence(srv: &Server, s: &mut Section) {
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
    s.line("rdb_bgsave_in_progress", job.is_some() as u8);
    s.line("rdb_last_save_time", srv.lastsave_s);
    s.line(
        "rdb_last_bgsave_status",
        if st.last_bgsave_ok { "ok" } else { "err" },
    );
    s.line("rdb_last_bgsave_time_sec", st.last_bgsave_time_sec);
    s.line(
        "rdb_current_bgsave_time_sec",
        job.map_or(-1, |j| j.started.elapsed().as_secs() as i64),
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

fn info_stats(srv: &Server, s: &mut Section) {
    let st = &srv.stats;
    let ks = &srv.ks.stats;
    let kbps = |bytes_per_sec: u64| format!("{:.2}", bytes_per_sec as f64 / 1024.0);
    s.line("total_connections_received", st.total_connections_received);
    s.line("total_commands_processed", st.total_commands_processed);
    s.line("instantaneous_ops_per_sec", st.inst_ops.per_sec());
    s.line("total_net_input_bytes", st.net_input_bytes);
    s.line("total_net_output_bytes", st.net_output_bytes);
    s.line("total_net_repl_input_bytes", 0);
    s.line("total_net_repl_output_bytes", 0);
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
    s.line("sync_full", 0);
    s.line("sync_partial_ok", 0);
    s.line("sync_partial_err", 0);
    s.line("expired_keys", ks.expired_keys);
    s.line(
        "expired_stale_perc",
        format_args!("{:.2}", ks.expired_stale_perc),
    );
    s.line(
        "expired_time_cap_reached_count",
        ks.expired_time_cap_reached_count,
    );
    s.line("evicted_keys", ks.evicted_keys);
    s.line("evicted_clients", 0);
    s.line("keyspace_hits", ks.hits);
    s.line("keyspace_misses", ks.misses);
    s.line("pubsub_channels", srv.pubsub.channels.len());
    s.line("pubsub_patterns", srv.pubsub.patterns.len());
    s.line("pubsubshard_channels", srv.pubsub.shard_channels.len());
    s.line("latest_fork_usec", 0);
    s.line("total_forks", 0);
    s.line("migrate_cached_sockets", 0);
    s.line("slave_expires_tracked_keys", 0);
    s.line("tracking_total_keys", 0);
    s.line("tracking_total_items", 0);
    s.line("tracking_total_prefixes", 0);
    s.line("unexpected_error_replies", 0);
    s.line("total_error_replies", st.total_error_replies);
    s.line("dump_payload_sanitizations", 0);
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

fn info_replication(srv: &Server, s: &mut Section) {
    s.line("role", "master");
    s.line("connected_slaves", 0);
    s.line("master_failover_state", "no-failover");
    s.line("master_replid", &srv.master_replid);
    s.line("master_replid2", "0000000000000000000000000000000000000000");
    s.line("master_repl_offset", 0);
    s.line("second_repl_offset", -1);
    s.line("repl_backlog_active", 0);
    s.line(
        "repl_backlog_size",
        srv.config
            .get_value("repl-backlog-size")
            .unwrap_or("1048576"),
    );
    s.line("repl_backlog_first_byte_offset", 0);
    s.line("repl_backlog_histlen", 0);
}

/// (system, user) CPU seconds of `who` (RUSAGE_SELF, RUSAGE_CHILDREN, RUSAGE_THREAD).
fn rusage(who: libc::c_int) -> (String, String) {
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

fn info_cpu(s: &mut Section) {
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

// ---- CONFIG -------------------------------------------------------------------------

fn config_get(ctx: &mut Ctx) -> CmdResult {
    let patterns: Vec<&[u8]> = (2..ctx.args.len()).map(|i| ctx.args.get(i)).collect();
    let found = ctx.srv.config.get_matching(&patterns);
    ctx.out.map(found.len());
    for (name, value) in &found {
        ctx.out.bulk_str(name);
        ctx.out.bulk_str(value);
    }
    Ok(())
}

fn config_set(ctx: &mut Ctx) -> CmdResult {
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
    let old_dir = ctx.srv.config.settings().dir.clone();
    ctx.srv
        .config
        .set_many(&pairs, allow_protected)
        .map_err(CmdError::raw)?;
    let s = ctx.srv.config.settings();
    crate::server::log::set_level(&s.loglevel);
    if s.dir != old_dir {
        // As Redis, `dir` is the working directory (files are written relative to it).
        if let Err(e) = std::env::set_current_dir(&s.dir) {
            crate::warning!("Can't chdir to '{}': {e}", s.dir);
        }
    }
    ctx.srv.apply_config();
    ctx.out.ok();
    Ok(())
}

fn config_resetstat(ctx: &mut Ctx) -> CmdResult {
    let srv = &mut *ctx.srv;
    srv.stats.reset();
    srv.cmdstats.reset();
    srv.ks.stats = Default::default();
    srv.stats.peak_memory = srv.used_memory();
    ctx.out.ok();
    Ok(())
}

fn config_rewrite(ctx: &mut Ctx) -> CmdResult {
    ctx.srv.config.rewrite().map_err(CmdError::raw)?;
    crate::notice!("CONFIG REWRITE executed with success.");
    ctx.out.ok();
    Ok(())
}

fn config_help(ctx: &mut Ctx) -> CmdResult {
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

// ---- TIME, LASTSAVE -----------------------------------------------------------------

fn time(ctx: &mut Ctx) -> CmdResult {
    let us = crate::util::now_us();
    ctx.out.array(2);
    ctx.out.bulk_i64(us.div_euclid(1_000_000));
    ctx.out.bulk_i64(us.rem_euclid(1_000_000));
    Ok(())
}

fn lastsave(ctx: &mut Ctx) -> CmdResult {
    ctx.out.int(ctx.srv.lastsave_s);
    Ok(())
}

// ---- COMMAND ------------------------------------------------------------------------

/// Finds `name` or `container|sub` in the command table.
fn find_command(
    srv: &Server,
    name: &[u8],
) -> Option<(&'static CommandSpec, Option<&'static CommandSpec>)> {
    match name.iter().position(|&b| b == b'|') {
        None => srv.commands.lookup(name).map(|c| (c, None)),
        Some(p) => {
            let parent = srv.commands.lookup(&name[..p])?;
            let sub = &name[p + 1..];
            parent
                .subcommands
                .iter()
                .find(|s| s.name.as_bytes().eq_ignore_ascii_case(sub))
                .map(|s| (s, Some(parent)))
        }
    }
}

fn display_name(spec: &CommandSpec, parent: Option<&CommandSpec>) -> String {
    match parent {
        Some(p) => super::full_name(p, spec),
        None => spec.name.to_string(),
    }
}

/// ACL categories derived from the command's flags and group (Redis's implicit rules
/// plus the category of its data type).
pub fn acl_categories(spec: &CommandSpec) -> Vec<&'static str> {
    let mut v = Vec::new();
    let f = spec.flags;
    if spec.group == "generic" {
        v.push("@keyspace");
    }
    if f & READONLY != 0 {
        v.push("@read");
    }
    if f & WRITE != 0 {
        v.push("@write");
    }
    match spec.group {
        "string" => v.push("@string"),
        "list" => v.push("@list"),
        "set" => v.push("@set"),
        "sorted-set" | "sorted_set" | "zset" => v.push("@sortedset"),
        "hash" => v.push("@hash"),
        "bitmap" => v.push("@bitmap"),
        "hyperloglog" => v.push("@hyperloglog"),
        "geo" => v.push("@geo"),
        "stream" => v.push("@stream"),
        _ => {}
    }
    if f & ADMIN != 0 {
        v.push("@admin");
    }
    // As Redis's setImplicitACLCategories: from the flag (the PUBSUB container and
    // PUBSUB HELP are in the pubsub group but only @slow).
    if f & PUBSUB != 0 {
        v.push("@pubsub");
    }
    v.push(if f & FAST != 0 { "@fast" } else { "@slow" });
    if f & BLOCKING != 0 {
        v.push("@blocking");
    }
    if f & (ADMIN | PROTECTED) != 0 {
        v.push("@dangerous");
    }
    match spec.group {
        "connection" => v.push("@connection"),
        "transactions" => v.push("@transaction"),
        "scripting" => v.push("@scripting"),
        _ => {}
    }
    v
}

/// Key-spec flags derived from the command's flags (CommandSpec has no per-key flags).
fn key_flags(spec: &CommandSpec) -> &'static [&'static str] {
    if spec.flags & WRITE != 0 {
        &["RW", "update"]
    } else {
        &["RO", "access"]
    }
}

/// One COMMAND INFO entry (Redis 7's 10-element shape).
fn write_command_info(out: &mut Reply, spec: &'static CommandSpec, parent: Option<&CommandSpec>) {
    out.array(10);
    out.bulk_str(&display_name(spec, parent));
    out.int(spec.arity as i64);
    let flags: Vec<&str> = FLAG_NAMES
        .iter()
        .filter(|(bit, _)| spec.flags & bit != 0)
        .map(|(_, n)| *n)
        .collect();
    out.set(flags.len());
    for f in flags {
        out.simple(f);
    }
    out.int(spec.first_key as i64);
    out.int(spec.last_key as i64);
    out.int(spec.key_step as i64);
    let cats = acl_categories(spec);
    out.set(cats.len());
    for c in cats {
        out.simple(c);
    }
    out.array(0); // tips
    if spec.first_key > 0 {
        out.array(1);
        out.map(3);
        out.bulk_str("flags");
        let kf = key_flags(spec);
        out.set(kf.len());
        for f in kf {
            out.simple(f);
        }
        out.bulk_str("begin_search");
        out.map(2);
        out.bulk_str("type");
        out.bulk_str("index");
        out.bulk_str("spec");
        out.map(1);
        out.bulk_str("index");
        out.int(spec.first_key as i64);
        out.bulk_str("find_keys");
        out.map(2);
        out.bulk_str("type");
        out.bulk_str("range");
        out.bulk_str("spec");
        out.map(3);
        out.bulk_str("lastkey");
        out.int(if spec.last_key < 0 {
            spec.last_key as i64
        } else {
            (spec.last_key - spec.first_key) as i64
        });
        out.bulk_str("keystep");
        out.int(spec.key_step as i64);
        out.bulk_str("limit");
        out.int(0);
    } else {
        out.array(0);
    }
    out.array(spec.subcommands.len());
    for sub in spec.subcommands {
        write_command_info(out, sub, Some(spec));
    }
}

/// One COMMAND DOCS value (a map: summary, since, group, subcommands).
fn write_command_docs(out: &mut Reply, spec: &'static CommandSpec, parent: Option<&CommandSpec>) {
    let has_subs = !spec.subcommands.is_empty();
    out.map(3 + has_subs as usize);
    out.bulk_str("summary");
    out.bulk_str(spec.summary);
    out.bulk_str("since");
    out.bulk_str(spec.since);
    out.bulk_str("group");
    out.bulk_str(spec.group);
    if has_subs {
        out.bulk_str("subcommands");
        out.map(spec.subcommands.len());
        for sub in spec.subcommands {
            out.bulk_str(&display_name(sub, Some(spec)));
            write_command_docs(out, sub, Some(spec));
        }
    }
    let _ = parent;
}

fn command_all(ctx: &mut Ctx) -> CmdResult {
    let all = ctx.srv.commands.all.clone();
    ctx.out.array(all.len());
    for spec in all {
        write_command_info(&mut ctx.out, spec, None);
    }
    Ok(())
}

fn command_count(ctx: &mut Ctx) -> CmdResult {
    ctx.out.int(ctx.srv.commands.len() as i64);
    Ok(())
}

fn command_info(ctx: &mut Ctx) -> CmdResult {
    if ctx.args.len() == 2 {
        return command_all(ctx);
    }
    ctx.out.array(ctx.args.len() - 2);
    for i in 2..ctx.args.len() {
        match find_command(ctx.srv, ctx.args.get(i)) {
            Some((spec, parent)) => write_command_info(&mut ctx.out, spec, parent),
            None => ctx.out.null(),
        }
    }
    Ok(())
}

fn command_docs(ctx: &mut Ctx) -> CmdResult {
    let mut found: Vec<(&'static CommandSpec, Option<&'static CommandSpec>)> = Vec::new();
    if ctx.args.len() == 2 {
        found.extend(ctx.srv.commands.all.iter().map(|s| (*s, None)));
    } else {
        for i in 2..ctx.args.len() {
            if let Some(f) = find_command(ctx.srv, ctx.args.get(i)) {
                found.push(f);
            }
        }
    }
    ctx.out.map(found.len());
    for (spec, parent) in found {
        ctx.out.bulk_str(&display_name(spec, parent));
        write_command_docs(&mut ctx.out, spec, parent);
    }
    Ok(())
}

fn command_list(ctx: &mut Ctx) -> CmdResult {
    enum Filter {
        All,
        Module,
        AclCat(String),
        Pattern(Vec<u8>),
    }
    let filter = match ctx.args.len() {
        2 => Filter::All,
        5 if ctx.args.is(2, "FILTERBY") => {
            if ctx.args.is(3, "MODULE") {
                Filter::Module
            } else if ctx.args.is(3, "ACLCAT") {
                Filter::AclCat(format!("@{}", ctx.args.str(4).to_ascii_lowercase()))
            } else if ctx.args.is(3, "PATTERN") {
                Filter::Pattern(ctx.args.get(4).to_vec())
            } else {
                return Err(CmdError::Syntax);
            }
        }
        _ => return Err(CmdError::Syntax),
    };
    let mut names = Vec::new();
    for spec in ctx.srv.commands.all.iter() {
        let entries =
            std::iter::once((*spec, None)).chain(spec.subcommands.iter().map(|s| (s, Some(*spec))));
        for (s, parent) in entries {
            let name = display_name(s, parent);
            let keep = match &filter {
                Filter::All => true,
                Filter::Module => false,
                Filter::AclCat(c) => acl_categories(s).contains(&c.as_str()),
                Filter::Pattern(p) => crate::util::glob_match(p, name.as_bytes(), true),
            };
            if keep {
                names.push(name);
            }
        }
    }
    ctx.out.array(names.len());
    for n in names {
        ctx.out.bulk_str(&n);
    }
    Ok(())
}

/// COMMAND GETKEYS / GETKEYSANDFLAGS <full command>: key positions from the spec.
fn command_getkeys(ctx: &mut Ctx) -> CmdResult {
    let with_flags = ctx.args.is(1, "GETKEYSANDFLAGS");
    let argc = ctx.args.len() - 2;
    let Some(mut spec) = ctx.srv.commands.lookup(ctx.args.get(2)) else {
        return Err(CmdError::err("Invalid command specified"));
    };
    if !spec.subcommands.is_empty() && argc >= 2 {
        let sub = ctx.args.get(3);
        if let Some(s) = spec
            .subcommands
            .iter()
            .find(|s| s.name.as_bytes().eq_ignore_ascii_case(sub))
        {
            spec = s;
        }
    }
    if !spec.arity_ok(argc) {
        return Err(CmdError::err(
            "Invalid number of arguments specified for command",
        ));
    }
    if spec.first_key <= 0 {
        return Err(CmdError::err("The command has no key arguments"));
    }
    let first = spec.first_key as usize;
    let last = if spec.last_key < 0 {
        argc as i64 + spec.last_key as i64
    } else {
        spec.last_key as i64
    };
    let step = spec.key_step.max(1) as usize;
    let last = last.min(argc as i64 - 1);
    let positions: Vec<usize> = if last < first as i64 {
        Vec::new()
    } else {
        (first..=last as usize).step_by(step).collect()
    };
    ctx.out.array(positions.len());
    for p in positions {
        let key = ctx.args.get(2 + p);
        if with_flags {
            ctx.out.array(2);
            ctx.out.bulk(key);
            let kf = key_flags(spec);
            ctx.out.set(kf.len());
            for f in kf {
                ctx.out.simple(f);
            }
        } else {
            ctx.out.bulk(key);
        }
    }
    Ok(())
}

fn command_help(ctx: &mut Ctx) -> CmdResult {
    help_reply(
        &mut ctx.out,
        "COMMAND",
        &[
            "(no subcommand)",
            "    Return details about all Redis commands.",
            "COUNT",
            "    Return the total number of commands in this Redis server.",
            "LIST",
            "    Return a list of all commands in this Redis server.",
            "INFO [<command-name> ...]",
            "    Return details about multiple Redis commands.",
            "    If no command names are given, documentation details for all",
            "    commands are returned.",
            "DOCS [<command-name> ...]",
            "    Return documentation details about multiple Redis commands.",
            "    If no command names are given, documentation details for all",
            "    commands are returned.",
            "GETKEYS <full-command>",
            "    Return the keys from a full Redis command.",
            "GETKEYSANDFLAGS <full-command>",
            "    Return the keys and the access flags from a full Redis command.",
        ],
    );
    Ok(())
}

// ---- MEMORY -------------------------------------------------------------------------

/// Bytes a key costs: its entry block plus its share of the db's bucket array (and its
/// slot in the volatile-key index when it has a TTL).
pub fn key_memory_usage(ks: &Keyspace, db: usize, e: crate::arena::Ref) -> u64 {
    let keys = ks.dbsize(db).max(1);
    let bucket_share = (ks.buckets(db) * 4).div_ceil(keys);
    let volatile = if ks.has_expire(e) { 4 } else { 0 };
    // Collections also own out-of-line blocks (quicklist nodes, dict tables and entries).
    let out_of_line = crate::collections::out_of_line_bytes(&ks.arena, ks.kind(e), ks.value(e));
    ks.entry_alloc_bytes(e) as u64 + bucket_share + volatile + out_of_line
}

fn memory_usage(ctx: &mut Ctx) -> CmdResult {
    let mut i = 3;
    while i < ctx.args.len() {
        if ctx.args.is(i, "SAMPLES") && i + 1 < ctx.args.len() {
            // Values live in one block, so there is nothing to sample; the count is
            // still validated as Redis does.
            if ctx.args.i64(i + 1)? < 0 {
                return Err(CmdError::Syntax);
            }
            i += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let db = ctx.db();
    match ctx.srv.ks.find(db, ctx.args.get(2), ctx.now_ms) {
        Some(e) => {
            let n = key_memory_usage(&ctx.srv.ks, db, e);
            ctx.out.int(n as i64);
        }
        None => ctx.out.null(),
    }
    Ok(())
}

fn memory_stats(ctx: &mut Ctx) -> CmdResult {
    let m = mem_figures(ctx.srv);
    let srv = &*ctx.srv;
    let keys: u64 = (0..srv.ks.num_dbs()).map(|d| srv.ks.dbsize(d)).sum();
    let dbs: Vec<usize> = (0..srv.ks.num_dbs())
        .filter(|&d| srv.ks.dbsize(d) > 0)
        .collect();
    let allocated = srv.ks.arena.used_bytes();
    let out = &mut ctx.out;
    out.map(25 + dbs.len());
    let int = |out: &mut Reply, k: &str, v: u64| {
        out.bulk_str(k);
        out.int(v as i64);
    };
    int(out, "peak.allocated", m.peak);
    int(out, "total.allocated", m.used);
    int(out, "startup.allocated", m.startup);
    int(out, "replication.backlog", 0);
    int(out, "clients.slaves", 0);
    int(out, "clients.normal", srv.client_buffer_bytes);
    int(out, "cluster.links", 0);
    int(out, "aof.buffer", 0);
    int(out, "lua.caches", 0);
    int(out, "functions.caches", 0);
    int(out, "overhead.total", m.overhead);
    int(out, "keys.count", keys);
    int(
        out,
        "keys.bytes-per-key",
        m.dataset.checked_div(keys).unwrap_or(0),
    );
    int(out, "dataset.bytes", m.dataset);
    let pct = |a: u64, b: u64| ratio(a, b) * 100.0;
    out.bulk_str("dataset.percentage");
    out.double(pct(m.dataset, m.used.saturating_sub(m.startup)));
    out.bulk_str("peak.percentage");
    out.double(pct(m.used, m.peak));
    int(out, "allocator.allocated", allocated);
    int(out, "allocator.active", m.allocator_active);
    int(out, "allocator.resident", m.rss);
    out.bulk_str("allocator-fragmentation.ratio");
    out.double(ratio(m.allocator_active, allocated));
    int(
        out,
        "allocator-fragmentation.bytes",
        m.allocator_active.saturating_sub(allocated),
    );
    out.bulk_str("rss-overhead.ratio");
    out.double(1.0);
    int(out, "rss-overhead.bytes", 0);
    out.bulk_str("fragmentation");
    out.double(ratio(m.rss, m.used));
    int(out, "fragmentation.bytes", m.rss.saturating_sub(m.used));
    for d in dbs {
        out.bulk_str(&format!("db.{d}"));
        out.map(2);
        int(out, "overhead.hashtable.main", srv.ks.buckets(d) * 4);
        int(
            out,
            "overhead.hashtable.expires",
            srv.ks.volatile_count(d) * 4,
        );
    }
    Ok(())
}

/// MEMORY DOCTOR: a short plain-language report on the figures INFO memory shows.
fn memory_doctor(ctx: &mut Ctx) -> CmdResult {
    let m = mem_figures(ctx.srv);
    let mut issues = Vec::new();
    if m.used >= 5 << 20 {
        if m.peak > m.used.saturating_mul(3) / 2 {
            issues.push(format!(
                "Peak memory ({}) is more than 150% of current use ({}); the arena keeps freed blocks for reuse, so resident memory stays near the peak.",
                bytes_to_human(m.peak),
                bytes_to_human(m.used)
            ));
        }
        if ratio(m.rss, m.used) > 1.4 {
            issues.push(format!(
                "Resident memory ({}) is more than 1.4 times the memory in use ({}).",
                bytes_to_human(m.rss),
                bytes_to_human(m.used)
            ));
        }
    }
    let report = if m.used < 5 << 20 {
        "This instance uses very little memory; there is nothing to diagnose yet.\n".to_string()
    } else if issues.is_empty() {
        "No memory issue found.\n".to_string()
    } else {
        let mut r = String::from("Memory issues found:\n\n");
        for i in issues {
            let _ = writeln!(r, " * {i}");
        }
        r
    };
    ctx.out.verbatim(report.as_bytes());
    Ok(())
}

fn memory_help(ctx: &mut Ctx) -> CmdResult {
    help_reply(
        &mut ctx.out,
        "MEMORY",
        &[
            "DOCTOR",
            "    Return memory problems reports.",
            "STATS",
            "    Return information about the memory usage of the server.",
            "USAGE <key> [SAMPLES <count>]",
            "    Return memory in bytes used by <key> and its value. Nested values are",
            "    sampled up to <count> times (default: 5, 0 means sample all).",
        ],
    );
    Ok(())
}

// ---- SLOWLOG ------------------------------------------------------------------------

fn slowlog_get(ctx: &mut Ctx) -> CmdResult {
    let count = if ctx.args.len() == 3 {
        match crate::util::parse_i64(ctx.args.get(2)) {
            Some(n) if n >= -1 => n,
            _ => return Err(CmdError::err("count should be greater than or equal to -1")),
        }
    } else if ctx.args.len() == 2 {
        10
    } else {
        return Err(CmdError::err(format!(
            "unknown subcommand or wrong number of arguments for '{}'. Try SLOWLOG HELP.",
            ctx.args.str(1)
        )));
    };
    let total = ctx.srv.slowlog.entries.len();
    let n = if count == -1 {
        total
    } else {
        (count as u64).min(total as u64) as usize
    };
    ctx.out.array(n);
    for e in ctx.srv.slowlog.entries.iter().take(n) {
        ctx.out.array(6);
        ctx.out.int(e.id as i64);
        ctx.out.int(e.time_s);
        ctx.out.int(e.duration_us as i64);
        ctx.out.array(e.args.len());
        for a in &e.args {
            ctx.out.bulk(a);
        }
        ctx.out.bulk_str(&e.peer);
        ctx.out.bulk_str(&e.name);
    }
    Ok(())
}

fn slowlog_len(ctx: &mut Ctx) -> CmdResult {
    ctx.out.int(ctx.srv.slowlog.entries.len() as i64);
    Ok(())
}

fn slowlog_reset(ctx: &mut Ctx) -> CmdResult {
    ctx.srv.slowlog.entries.clear();
    ctx.out.ok();
    Ok(())
}

fn slowlog_help(ctx: &mut Ctx) -> CmdResult {
    help_reply(
        &mut ctx.out,
        "SLOWLOG",
        &[
            "GET [<count>]",
            "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
            "    Entries are made of:",
            "    id, timestamp, time in microseconds, arguments array, client IP and port,",
            "    client name",
            "LEN",
            "    Return the length of the slowlog.",
            "RESET",
            "    Reset the slowlog.",
        ],
    );
    Ok(())
}

// ---- LATENCY ------------------------------------------------------------------------

fn latency_latest(ctx: &mut Ctx) -> CmdResult {
    let events = &ctx.srv.latency.events;
    let live: Vec<_> = events
        .iter()
        .filter_map(|(name, ev)| ev.samples.back().map(|s| (name, *s, ev.max_ms)))
        .collect();
    ctx.out.array(live.len());
    for (name, (ts, ms), max) in live {
        ctx.out.array(4);
        ctx.out.bulk_str(name);
        ctx.out.int(ts);
        ctx.out.int(ms as i64);
        ctx.out.int(max as i64);
    }
    Ok(())
}

fn latency_history(ctx: &mut Ctx) -> CmdResult {
    let name = ctx.args.str(2);
    match ctx.srv.latency.events.get(&name) {
        None => ctx.out.array(0),
        Some(ev) => {
            ctx.out.array(ev.samples.len());
            for (ts, ms) in &ev.samples {
                ctx.out.array(2);
                ctx.out.int(*ts);
                ctx.out.int(*ms as i64);
            }
        }
    }
    Ok(())
}

fn latency_reset(ctx: &mut Ctx) -> CmdResult {
    let names: Vec<String> = (2..ctx.args.len()).map(|i| ctx.args.str(i)).collect();
    let n = ctx.srv.latency.reset(&names);
    ctx.out.int(n as i64);
    Ok(())
}

/// LATENCY DOCTOR: a plain-language summary of the recorded latency events.
fn latency_doctor(ctx: &mut Ctx) -> CmdResult {
    let threshold = ctx.srv.config.settings().latency_monitor_threshold;
    let mut report = String::new();
    if ctx.srv.latency.events.is_empty() {
        if threshold == 0 {
            report.push_str("Latency monitoring is disabled. Enable it with CONFIG SET latency-monitor-threshold <milliseconds>.\n");
        } else {
            report.push_str("No latency spike above the threshold was recorded.\n");
        }
    } else {
        report.push_str("Latency spikes were recorded:\n\n");
        for (i, (name, ev)) in ctx.srv.latency.events.iter().enumerate() {
            let n = ev.samples.len().max(1) as u64;
            let avg = ev.samples.iter().map(|s| s.1).sum::<u64>() / n;
            let _ = writeln!(
                report,
                "{}. {name}: {} spikes (average {avg}ms). Worst: {}ms.",
                i + 1,
                ev.samples.len(),
                ev.max_ms
            );
        }
        report.push_str("\nCheck the slow log (SLOWLOG GET) for the commands involved.\n");
    }
    ctx.out.verbatim(report.as_bytes());
    Ok(())
}

fn latency_help(ctx: &mut Ctx) -> CmdResult {
    help_reply(
        &mut ctx.out,
        "LATENCY",
        &[
            "DOCTOR",
            "    Return a human readable latency analysis report.",
            "HISTORY <event>",
            "    Return time-latency samples for the <event> class.",
            "LATEST",
            "    Return the latest latency samples for all events.",
            "RESET [<event> ...]",
            "    Reset latency data of one or more <event> classes.",
            "    (default: reset all data for all event classes)",
        ],
    );
    Ok(())
}

// ---- DEBUG --------------------------------------------------------------------------

fn debug(ctx: &mut Ctx) -> CmdResult {
    let argc = ctx.args.len();
    let sub = ctx.args.str(1).to_ascii_lowercase();
    match (sub.as_str(), argc) {
        ("help", 2) => debug_help(ctx),
        ("sleep", 3) => {
            // Redis parses with strtod: garbage means 0 seconds.
            let secs = crate::util::parse_f64(ctx.args.get(2)).unwrap_or(0.0);
            if let Ok(d) = std::time::Duration::try_from_secs_f64(secs) {
                std::thread::sleep(d);
            }
            ctx.out.ok();
            Ok(())
        }
        ("digest", 2) => {
            let d = dataset_digest(&ctx.srv.ks);
            ctx.out.simple(&hex(&d));
            Ok(())
        }
        ("digest-value", _) => {
            ctx.out.array(argc - 2);
            let db = ctx.db();
            for i in 2..argc {
                let mut d = [0u8; 20];
                if let Some(e) = ctx.srv.ks.find_raw(db, ctx.args.get(i)) {
                    xor_object_digest(&ctx.srv.ks, e, &mut d);
                }
                ctx.out.simple(&hex(&d));
            }
            Ok(())
        }
        ("object", 3) => {
            let db = ctx.db();
            let Some(e) = ctx.srv.ks.find_raw(db, ctx.args.get(2)) else {
                return Err(CmdError::NoSuchKey);
            };
            let fill = ctx
                .srv
                .config
                .get_value("list-max-listpack-size")
                .and_then(|v| v.parse::<i64>().ok())
                .unwrap_or(-2);
            let line = debug_object_line(&ctx.srv.ks, e, fill);
            ctx.out.simple(&line);
            Ok(())
        }
        ("aof-pause-syncs", 3) => {
            // cairn's own: with 1 the log issues no group fsync (a rotation or shutdown
            // still syncs), so under `appendfsync always` write replies and reads of the
            // keys they touched wait until 0 (tests).
            let paused = crate::util::parse_i64(ctx.args.get(2)).unwrap_or(0) != 0;
            if !ctx.srv.aof.pause_syncs(paused) {
                return Err(CmdError::err("the append only file is not open"));
            }
            ctx.out.ok();
            Ok(())
        }
        ("set-active-expire", 3) => {
            // As Redis (atoi): any non-zero number enables it.
            let v = crate::util::parse_i64(ctx.args.get(2)).unwrap_or(0);
            ctx.srv.active_expire_enabled = v != 0;
            ctx.out.ok();
            Ok(())
        }
        _ => Err(CmdError::err(format!(
            "unknown subcommand or wrong number of arguments for '{}'. Try DEBUG HELP.",
            ctx.args.str(1)
        ))),
    }
}

fn debug_help(ctx: &mut Ctx) -> CmdResult {
    help_reply(
        &mut ctx.out,
        "DEBUG",
        &[
            "AOF-PAUSE-SYNCS <0|1>",
            "    With 1 the append only file issues no fsync: under appendfsync always,",
            "    write replies and reads of the keys they wrote wait until it is set to 0.",
            "DIGEST",
            "    Output a hex signature representing the current DB content.",
            "DIGEST-VALUE <key> [<key> ...]",
            "    Output a hex signature of the values of all the specified keys.",
            "OBJECT <key>",
            "    Show low level info about `key` and associated value.",
            "SET-ACTIVE-EXPIRE <0|1>",
            "    Setting it to 0 disables expiring keys in background when they are not",
            "    accessed (otherwise the Redis behavior). Setting it to 1 reenables back the",
            "    default.",
            "SLEEP <seconds>",
            "    Stop the server for <seconds>. Decimals allowed.",
        ],
    );
    Ok(())
}

/// Bytes RDB would use for a length prefix (6-bit, 14-bit, 32-bit or 64-bit forms).
fn rdb_len_bytes(n: u64) -> u64 {
    if n < 1 << 6 {
        1
    } else if n < 1 << 14 {
        2
    } else if n <= u32::MAX as u64 {
        5
    } else {
        9
    }
}

/// DEBUG OBJECT's `serializedlength`: the value's size in an RDB dump without LZF
/// compression (integers in their compact 1/2/4-byte forms).
fn serialized_length(ks: &Keyspace, e: crate::arena::Ref) -> u64 {
    let v = ks.value(e);
    // Only canonical integers that fit 32 bits take RDB's integer forms.
    let int = (ks.kind(e) == Kind::String && v.len() <= 11)
        .then(|| crate::util::parse_i64(v))
        .flatten()
        .filter(|n| n.to_string().as_bytes() == v);
    match int {
        Some(n) if (-128..=127).contains(&n) => return 2,
        Some(n) if (-32768..=32767).contains(&n) => return 3,
        Some(n) if (i32::MIN as i64..=i32::MAX as i64).contains(&n) => return 5,
        _ => {}
    }
    rdb_len_bytes(v.len() as u64) + v.len() as u64
}

fn debug_object_line(ks: &Keyspace, e: crate::arena::Ref, list_fill: i64) -> String {
    let addr = ks.arena.base_addr() as u64 + e as u64 * 8;
    let encoding = match ks.kind(e) {
        Kind::String => ks.str_enc(e).name(),
        Kind::List => "quicklist",
        Kind::Hash if crate::collections::hash::is_ht(ks.value(e)) => "hashtable",
        Kind::Hash => "listpack",
        Kind::ZSet if crate::collections::zset::is_sl(ks.value(e)) => "skiplist",
        Kind::ZSet => "listpack",
        Kind::Set => match ks.enc(e) {
            crate::collections::set::ENC_INTSET => "intset",
            crate::collections::set::ENC_LISTPACK => "listpack",
            _ => "hashtable",
        },
    };
    let lru = ks.lru(e) & crate::keyspace::LRU_CLOCK_MAX;
    let now = crate::keyspace::lru_clock();
    let idle = if now >= lru {
        now - lru
    } else {
        crate::keyspace::LRU_CLOCK_MAX - lru + now
    };
    format!(
        "Value at:0x{addr:x} refcount:1 encoding:{encoding} serializedlength:{} lru:{lru} lru_seconds_idle:{idle}{}",
        serialized_length(ks, e),
        quicklist_fields(ks, e, list_fill)
    )
}

/// The quicklist fields Redis appends to DEBUG OBJECT for lists (an inline list counts
/// as one node, as the single node Redis would have).
fn quicklist_fields(ks: &Keyspace, e: crate::arena::Ref, fill: i64) -> String {
    use crate::collections::list;
    if ks.kind(e) != Kind::List {
        return String::new();
    }
    let segs = list::segments(ks, e);
    let nodes = segs.len().max(1);
    let size: usize = segs.iter().map(|&s| list::seg_lp(ks, e, s).len()).sum();
    let avg = list::len(ks, e) as f64 / nodes as f64;
    format!(
        " ql_nodes:{nodes} ql_avg_node:{avg:.2} ql_listpack_max:{fill} ql_compressed:0 ql_uncompressed_size:{size}"
    )
}

fn hex(d: &[u8; 20]) -> String {
    let mut s = String::with_capacity(40);
    for b in d {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// digest ^= SHA1(data)
fn xor_digest(digest: &mut [u8; 20], data: &[u8]) {
    let h = sha1::digest(data);
    for (d, x) in digest.iter_mut().zip(h) {
        *d ^= x;
    }
}

/// digest = SHA1(digest ^ SHA1(data)): order-sensitive mixing.
fn mix_digest(digest: &mut [u8; 20], data: &[u8]) {
    xor_digest(digest, data);
    *digest = sha1::digest(digest);
}

/// Mixes one value into `digest` as Redis's DEBUG DIGEST does: the type (big-endian
/// u32), the value, then a marker if the key has a TTL. Strings give Redis's exact
/// digest; other types are mixed from their stored bytes.
fn xor_object_digest(ks: &Keyspace, e: crate::arena::Ref, digest: &mut [u8; 20]) {
    let kind = ks.kind(e);
    mix_digest(digest, &(kind as u32).to_be_bytes());
    match kind {
        // Lists: every element mixed in order; hashes: each field/value pair's own
        // digest XORed in (order-free), exactly as Redis's xorObjectDigest.
        Kind::List => crate::collections::list::walk(ks, e, 0, false, |v| {
            mix_digest(digest, &v.to_vec());
            true
        }),
        Kind::Hash => crate::collections::hash::for_each(ks, e, |f, v| {
            let mut d = [0u8; 20];
            mix_digest(&mut d, &f.to_vec());
            mix_digest(&mut d, &v.to_vec());
            xor_digest(digest, &d);
        }),
        // Sorted sets: like hashes, each member/score pair's own digest XORed in, the
        // score as Redis 7.0's `%.17g` text.
        Kind::ZSet => crate::collections::zset::walk(ks, e, 0, false, |m, s| {
            let mut d = [0u8; 20];
            mix_digest(&mut d, m);
            mix_digest(&mut d, crate::protocol::reply::format_double(s).as_bytes());
            xor_digest(digest, &d);
            true
        }),
        // Sets: each member's SHA1 XORed in (order-free), as Redis.
        Kind::Set => crate::collections::set::for_each(ks, e, |m| {
            xor_digest(digest, &m.to_vec());
        }),
        _ => mix_digest(digest, ks.value(e)),
    }
    if ks.has_expire(e) {
        xor_digest(digest, b"!!expire!!");
    }
}

/// DEBUG DIGEST: XOR of the SHA1s of per-key digests (so key order does not matter), each database
/// mixed in by index; 20 zero bytes when the dataset is empty.
pub fn dataset_digest(ks: &Keyspace) -> [u8; 20] {
    let mut fin = [0u8; 20];
    for db in 0..ks.num_dbs() {
        if ks.dbsize(db) == 0 {
            continue;
        }
        mix_digest(&mut fin, &(db as u32).to_be_bytes());
        let mut cursor = 0;
        loop {
            cursor = ks.scan(db, cursor, |e| {
                let mut d = [0u8; 20];
                mix_digest(&mut d, ks.key(e));
                xor_object_digest(ks, e, &mut d);
                xor_digest(&mut fin, &d);
            });
            if cursor == 0 {
                break;
            }
        }
    }
    fin
}

/// SHA-1 (FIPS 180-4), for DEBUG DIGEST.
mod sha1 {
    pub fn digest(data: &[u8]) -> [u8; 20] {
        let mut h: [u32; 5] = [0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0];
        let bit_len = (data.len() as u64).wrapping_mul(8);
        let mut msg = data.to_vec();
        msg.push(0x80);
        while msg.len() % 64 != 56 {
            msg.push(0);
        }
        msg.extend_from_slice(&bit_len.to_be_bytes());
        for block in msg.chunks_exact(64) {
            let mut w = [0u32; 80];
            for (i, c) in block.chunks_exact(4).enumerate() {
                w[i] = u32::from_be_bytes([c[0], c[1], c[2], c[3]]);
            }
            for i in 16..80 {
                w[i] = (w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16]).rotate_left(1);
            }
            let [mut a, mut b, mut c, mut d, mut e] = h;
            for (i, wi) in w.iter().enumerate() {
                let (f, k) = match i {
                    0..=19 => ((b & c) | (!b & d), 0x5A827999),
                    20..=39 => (b ^ c ^ d, 0x6ED9EBA1),
                    40..=59 => ((b & c) | (b & d) | (c & d), 0x8F1BBCDC),
                    _ => (b ^ c ^ d, 0xCA62C1D6),
                };
                let t = a
                    .rotate_left(5)
                    .wrapping_add(f)
                    .wrapping_add(e)
                    .wrapping_add(k)
                    .wrapping_add(*wi);
                e = d;
                d = c;
                c = b.rotate_left(30);
                b = a;
                a = t;
            }
            for (x, y) in h.iter_mut().zip([a, b, c, d, e]) {
                *x = x.wrapping_add(y);
            }
        }
        let mut out = [0u8; 20];
        for (i, v) in h.iter().enumerate() {
            out[i * 4..i * 4 + 4].copy_from_slice(&v.to_be_bytes());
        }
        out
    }

    #[cfg(test)]
    mod tests {
        #[test]
        fn known_vectors() {
            let hex = |d: [u8; 20]| d.iter().map(|b| format!("{b:02x}")).collect::<String>();
            assert_eq!(
                hex(super::digest(b"")),
                "da39a3ee5e6b4b0d3255bfef95601890afd80709"
            );
            assert_eq!(
                hex(super::digest(b"abc")),
                "a9993e364706816aba3e25717850c26c9cd0d89d"
            );
            let long = vec![b'a'; 1000];
            assert_eq!(
                hex(super::digest(&long)),
                "291e9a6c66994949b57ba5e650361e98fc36b1ba"
            );
        }
    }
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

    #[test]
    fn rdb_length_prefixes() {
        assert_eq!(rdb_len_bytes(63), 1);
        assert_eq!(rdb_len_bytes(64), 2);
        assert_eq!(rdb_len_bytes(16383), 2);
        assert_eq!(rdb_len_bytes(16384), 5);
    }
}
