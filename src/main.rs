//! `cairn-server [cairn.conf] [--option value ...]` — started like redis-server.

use cairn::commands::executor::Server;
use cairn::config::Config;
use cairn::log;
use cairn::server::event_loop;
use cairn::{notice, warning};

fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    if argv.first().is_some_and(|a| a == "--check-aof") {
        std::process::exit(cairn::persistence::aof::check_aof_cli(&argv[1..]));
    }
    if argv.iter().any(|a| a == "-v" || a == "--version") {
        println!(
            "cairn server v={} (Redis 7.0 compatible)",
            env!("CARGO_PKG_VERSION")
        );
        return;
    }
    if argv.iter().any(|a| a == "-h" || a == "--help") {
        println!("Usage: cairn-server [/path/to/cairn.conf] [options]");
        println!("       cairn-server -v or --version");
        println!("       cairn-server --check-aof [--fix [-y]] <file.manifest|file.aof>");
        println!("Examples:");
        println!("       cairn-server (run the server with default config)");
        println!("       cairn-server /etc/redis/6379.conf");
        println!("       cairn-server --port 7777");
        println!("       cairn-server /etc/mycairn.conf --loglevel verbose");
        return;
    }
    if argv.first().map(String::as_str) == Some("--export-rdb") {
        std::process::exit(export_rdb(&argv[1..]));
    }
    let config = match Config::from_args(&argv) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    let s = config.settings().clone();
    if s.daemonize && std::env::var_os(DAEMON_CHILD_ENV).is_none() {
        std::process::exit(daemonize(&argv));
    }
    if let Err(e) = log::init(&s.loglevel, &s.logfile) {
        eprintln!("Can't open the log file: {e}");
        std::process::exit(1);
    }
    if let Err(e) = std::env::set_current_dir(&s.dir) {
        warning!("Can't chdir to '{}': {e}", s.dir);
        std::process::exit(1);
    }
    notice!("oO0OoO0OoO0Oo cairn is starting oO0OoO0OoO0Oo");
    notice!(
        "cairn version={}, bits=64, pid={}, just started",
        env!("CARGO_PKG_VERSION"),
        std::process::id()
    );
    match &config.config_file {
        Some(f) => notice!("Configuration loaded from {f}"),
        None => warning!("Warning: no config file specified, using the default config. In order to specify a config file use cairn-server /path/to/cairn.conf"),
    }
    for w in &config.warnings {
        warning!("{w}");
    }
    // Redis writes a pid file when daemonized even without `pidfile` (its default path).
    let pidfile = match (s.pidfile.is_empty(), s.daemonize) {
        (false, _) => s.pidfile.clone(),
        (true, true) => DEFAULT_PID_FILE.to_string(),
        (true, false) => String::new(),
    };
    if !pidfile.is_empty() {
        if let Err(e) = std::fs::write(&pidfile, format!("{}\n", std::process::id())) {
            warning!("Failed to write PID file: {e}");
        }
    }
    raise_fd_limit(s.maxclients as u64 + 32);
    event_loop::install_signal_handlers();
    let mut srv = match Server::open(config) {
        Ok(s) => s,
        Err(e) => {
            warning!("Fatal: {e}");
            std::process::exit(1);
        }
    };
    // Replays the append-only log (when `appendonly yes`) before serving anyone.
    if let Err(e) = cairn::commands::executor::aof_startup::startup(&mut srv) {
        warning!("Fatal error loading the DB: {e}. Exiting.");
        std::process::exit(1);
    }
    if let Err(e) = cairn::commands::executor::tiering::start(&mut srv) {
        warning!("Fatal error starting tiering: {e}. Exiting.");
        std::process::exit(1);
    }
    // As Valkey: `io-threads N` counts the main thread, so N - 1 threads do socket I/O.
    let result = if s.io_threads > 1 {
        cairn::server::io_threads::serve_threaded(srv, s.io_threads - 1)
    } else {
        event_loop::serve(srv)
    };
    if let Err(e) = result {
        warning!("{e}");
        std::process::exit(1);
    }
    if !pidfile.is_empty() {
        let _ = std::fs::remove_file(&pidfile);
    }
}

/// Set in the environment of the process `daemonize` starts, so it serves instead of
/// starting another.
const DAEMON_CHILD_ENV: &str = "CAIRN_DAEMONIZED";
const DEFAULT_PID_FILE: &str = "/var/run/redis.pid";

/// `daemonize yes`: the server goes on in a new session, detached from the terminal, and
/// this process exits at once, as Redis's daemonize(). Redis forks; cairn starts its own
/// binary again instead (with the same arguments), before anything is loaded — no
/// process holding data is ever forked. Returns the exit code.
fn daemonize(argv: &[String]) -> i32 {
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("Can't daemonize: {e}");
            return 1;
        }
    };
    let mut cmd = Command::new(exe);
    cmd.args(argv)
        .env(DAEMON_CHILD_ENV, "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: setsid is async-signal-safe and touches no memory of this process.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    match cmd.spawn() {
        Ok(_) => 0,
        Err(e) => {
            eprintln!("Can't daemonize: {e}");
            1
        }
    }
}

/// `cairn-server --export-rdb IMAGE OUT.rdb`: reads a finished snapshot image (off any
/// server) and writes a Redis 7.0 RDB that redis-server loads.
fn export_rdb(args: &[String]) -> i32 {
    let [image, out] = args else {
        eprintln!("Usage: cairn-server --export-rdb IMAGE OUT.rdb");
        return 2;
    };
    let defaults = Config::default();
    let s = defaults.settings();
    let progress = cairn::persistence::snapshot::format::LoadProgress::default();
    let loaded = cairn::persistence::snapshot::load_image(
        std::path::Path::new(image),
        s.arena_reserve_bytes,
        &progress,
    );
    let (arena, header) = match loaded {
        Ok(Some(x)) => x,
        Ok(None) => {
            eprintln!("No image at {image}");
            return 1;
        }
        Err(e) => {
            eprintln!("Cannot read the image: {e}");
            return 1;
        }
    };
    let mut ks = match cairn::collections::keyspace_from_arena(arena, s.databases) {
        Ok(k) => k,
        Err(e) => {
            eprintln!("Cannot open the image's keyspace: {e}");
            return 1;
        }
    };
    let mut buf = Vec::new();
    let keys = match cairn::persistence::rdb_file::write_rdb_with_functions(
        &mut ks,
        &mut buf,
        &[],
        &header.functions,
        0,
    ) {
        Ok(n) => n,
        Err(e) => {
            eprintln!("Cannot export: {e}");
            return 1;
        }
    };
    let tmp = format!("{out}.tmp-{}", std::process::id());
    if let Err(e) = std::fs::write(&tmp, &buf).and_then(|_| std::fs::rename(&tmp, out)) {
        eprintln!("Cannot write {out}: {e}");
        let _ = std::fs::remove_file(&tmp);
        return 1;
    }
    println!("Exported {keys} keys to {out} ({} bytes)", buf.len());
    0
}

/// Raises RLIMIT_NOFILE so `maxclients` connections fit, as Redis does.
fn raise_fd_limit(want: u64) {
    // SAFETY: getrlimit/setrlimit with a valid, initialised struct.
    unsafe {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < want {
            let target = want.min(lim.rlim_max);
            lim.rlim_cur = target;
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 || target < want {
                warning!("You requested maxclients of {} requiring at least {want} max file descriptors; the limit is {target}.", want - 32);
            }
        }
    }
}
