//! Lua scripting as Redis 7: EVAL, EVALSHA, EVAL_RO, EVALSHA_RO, SCRIPT LOAD | EXISTS |
//! FLUSH | KILL | DEBUG | HELP (Redis's `eval.c`, `script.c`, `script_lua.c`).
//!
//! A script runs on the executor like any command, so it is atomic. Its `redis.call`s go
//! through `Server::execute_in_script` (Redis's scriptCall checks, then the ordinary
//! pipeline step: stats, WATCH, blocking waiters, the propagation hook). The log gets the
//! script's effects, never the script: the hook collects the entries of the commands the
//! script ran (`Aof::script_capture`) and logs them when EVAL ends, in MULTI/EXEC when
//! there is more than one — so a restart never runs a script again.
//!
//! Past `busy-reply-threshold` (`lua-time-limit`) a script is slow: logged once, as
//! Redis logs it, and busy (`ScriptBusy`): other clients get `-BUSY` and may SCRIPT KILL
//! it or SHUTDOWN NOSAVE — with `io-threads 1` the script's hook serves them through the
//! socket loop (`Server::serve_while_busy`), with I/O threads those answer (see
//! ARCHITECTURE.md, "Scripting").

pub mod cjson;
pub mod cmsgpack;
pub mod convert;
pub mod engine;
pub mod functions;
pub mod lualib;
mod raw_call;

use super::{CmdError, CmdResult, CommandSpec, Ctx};
use super::{ALLOW_BUSY, MAY_REPLICATE, MONITOR_FIRST, NOSCRIPT, READONLY, SKIP_MONITOR, STALE};
use super::{LOADING, NO_MANDATORY_KEYS};
use crate::protocol::reply::Resp;
pub use engine::ScriptBusy;
use engine::{Engine, Outcome};
use mlua::Lua;
use std::cell::RefCell;
use std::ffi::c_void;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// `redis.REDIS_VERSION` and its number (0x00MMmmpp), the version cairn reports.
pub const REDIS_VERSION: &str = super::connection::COMPAT_REDIS_VERSION;
pub const REDIS_VERSION_NUM: i64 = (7 << 16) | 15;

pub const NOSCRIPT_ERR: &str = "NOSCRIPT No matching script. Please use EVAL.";

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new(
        "eval",
        -3,
        NOSCRIPT | STALE | SKIP_MONITOR | MONITOR_FIRST | NO_MANDATORY_KEYS | MAY_REPLICATE,
        "scripting",
        eval,
    )
    .doc("Executes a server-side Lua script.", "2.6.0"),
    CommandSpec::new(
        "evalsha",
        -3,
        NOSCRIPT | STALE | SKIP_MONITOR | MONITOR_FIRST | NO_MANDATORY_KEYS | MAY_REPLICATE,
        "scripting",
        evalsha,
    )
    .doc("Executes a server-side Lua script by SHA1 digest.", "2.6.0"),
    CommandSpec::new(
        "eval_ro",
        -3,
        NOSCRIPT | STALE | SKIP_MONITOR | MONITOR_FIRST | NO_MANDATORY_KEYS | READONLY,
        "scripting",
        eval_ro,
    )
    .doc("Executes a read-only server-side Lua script.", "7.0.0"),
    CommandSpec::new(
        "evalsha_ro",
        -3,
        NOSCRIPT | STALE | SKIP_MONITOR | MONITOR_FIRST | NO_MANDATORY_KEYS | READONLY,
        "scripting",
        evalsha_ro,
    )
    .doc(
        "Executes a read-only server-side Lua script by SHA1 digest.",
        "7.0.0",
    ),
    CommandSpec::new("script", -2, 0, "scripting", script_help)
        .acl(0)
        .doc("A container for Lua scripts management commands.", "2.6.0")
        .subs(SCRIPT_SUBS),
];

static SCRIPT_SUBS: &[CommandSpec] = &[
    CommandSpec::new("load", 3, NOSCRIPT | STALE, "scripting", script_load).doc(
        "Loads a server-side Lua script to the script cache.",
        "2.6.0",
    ),
    CommandSpec::new("exists", -3, NOSCRIPT, "scripting", script_exists).doc(
        "Determines whether server-side Lua scripts exist in the script cache.",
        "2.6.0",
    ),
    CommandSpec::new(
        "flush",
        -2,
        NOSCRIPT | MAY_REPLICATE,
        "scripting",
        script_flush,
    )
    .doc(
        "Removes all server-side Lua scripts from the script cache.",
        "2.6.0",
    ),
    CommandSpec::new("kill", 2, NOSCRIPT | ALLOW_BUSY, "scripting", script_kill).doc(
        "Terminates a server-side Lua script during execution.",
        "2.6.0",
    ),
    CommandSpec::new("debug", 3, NOSCRIPT, "scripting", script_debug)
        .doc("Sets the debug mode of server-side Lua scripts.", "3.2.0"),
    CommandSpec::new("help", 2, LOADING | STALE, "scripting", script_help).doc(
        "Returns helpful text about the different subcommands.",
        "5.0.0",
    ),
];

/// What a script's `redis.call` may do (decided when the script starts).
#[derive(Clone, Copy, Debug, Default)]
pub struct ScriptRules {
    /// EVAL_RO / EVALSHA_RO, or the `no-writes` flag: write commands are refused.
    pub read_only: bool,
    /// The `allow-oom` flag: `denyoom` commands run even over `maxmemory`.
    pub allow_oom: bool,
    /// Memory was over `maxmemory` (after eviction) when the script started.
    pub oom_at_start: bool,
}

/// Commands Redis 7.0 refuses in scripts besides those flagged `noscript` here (their
/// flags in cairn's table serve other purposes); containers refuse all subcommands.
const DENIED_IN_SCRIPTS: &[&str] = &[
    "auth",
    "hello",
    "reset",
    "quit",
    "client",
    "config",
    "latency",
    "debug",
    "monitor",
    "role",
    "wait",
    "replicaof",
    "slaveof",
    "sync",
    "psync",
    "replconf",
    "failover",
    "acl",
    "module",
    "function",
    "fcall",
    "fcall_ro",
];

/// Whether a script may call `spec` (of container `parent`).
pub fn denied_in_script(spec: &CommandSpec, parent: Option<&CommandSpec>) -> bool {
    let top = parent.unwrap_or(spec);
    spec.flags & NOSCRIPT != 0 || top.flags & NOSCRIPT != 0 || DENIED_IN_SCRIPTS.contains(&top.name)
}

/// The script cache and Lua state (None until the first script, and after SCRIPT FLUSH),
/// and the running script's kill switch.
#[derive(Default)]
pub struct Scripts {
    engine: Option<Engine>,
    /// The running script's state, shared with the I/O threads that answer other clients
    /// while it is busy.
    pub busy: Arc<ScriptBusy>,
    /// `math.random`'s generator: one sequence for the server's lifetime, as Redis's.
    rand: engine::Lrand48,
    /// The running function (FCALL) as FUNCTION STATS shows it.
    pub running: Option<Running>,
    /// FUNCTION libraries (a Lua state of their own).
    pub functions: functions::Functions,
    /// Figures for INFO while the engine is lent to a running script.
    cached: usize,
    body_bytes: usize,
    lua_bytes: usize,
}

/// A running function: its name, its caller's command, when it started.
pub struct Running {
    pub name: String,
    pub argv: Vec<Vec<u8>>,
    pub start: std::time::Instant,
}

impl Scripts {
    fn engine(&mut self) -> Result<&mut Engine, CmdError> {
        if self.engine.is_none() {
            let e = Engine::new()
                .map_err(|e| CmdError::err(format!("Can't start the Lua engine: {e}")))?;
            self.engine = Some(e);
        }
        self.engine
            .as_mut()
            .ok_or_else(|| CmdError::err("Lua engine unavailable"))
    }

    fn refresh_stats(&mut self) {
        if let Some(e) = &self.engine {
            self.cached = e.scripts.len();
            self.body_bytes = e.scripts_bytes;
            self.lua_bytes = e.used_memory();
        } else {
            self.cached = 0;
            self.body_bytes = 0;
            self.lua_bytes = 0;
        }
    }

    /// INFO `number_of_cached_scripts`.
    pub fn cached(&self) -> usize {
        self.cached
    }
    /// INFO `used_memory_scripts_eval`: the cached scripts' bodies plus a per-script
    /// overhead (cache entry, compiled function header).
    pub fn body_bytes(&self) -> usize {
        self.body_bytes + self.cached * 96
    }
    /// INFO `used_memory_lua` / `used_memory_vm_eval`.
    pub fn lua_bytes(&self) -> usize {
        self.lua_bytes
    }
}

fn eval(ctx: &mut Ctx) -> CmdResult {
    eval_generic(ctx, false, false)
}
fn evalsha(ctx: &mut Ctx) -> CmdResult {
    eval_generic(ctx, true, false)
}
fn eval_ro(ctx: &mut Ctx) -> CmdResult {
    eval_generic(ctx, false, true)
}
fn evalsha_ro(ctx: &mut Ctx) -> CmdResult {
    eval_generic(ctx, true, true)
}

/// What `redis.call` reaches while a script runs.
struct CallCtx<'a, 'b> {
    ctx: &'a mut Ctx<'b>,
    rules: ScriptRules,
    /// The running state (`redis.setresp` / `redis.set_repl` live in its app data).
    lua: Lua,
}

fn eval_generic(ctx: &mut Ctx, by_sha: bool, ro: bool) -> CmdResult {
    let args = ctx.args;
    let numkeys = args.i64(2)?;
    if numkeys > args.len() as i64 - 3 {
        return Err(CmdError::err(
            "Number of keys can't be greater than number of args",
        ));
    }
    if numkeys < 0 {
        return Err(CmdError::err("Number of keys can't be negative"));
    }
    let sha = if by_sha {
        String::from_utf8_lossy(args.get(1)).to_ascii_lowercase()
    } else {
        engine::sha1_hex(args.get(1))
    };
    let engine = ctx.srv.scripts.engine()?;
    if !by_sha && !engine.scripts.contains_key(&sha) {
        let body = args.get(1);
        let (flags, skip) = engine::shebang(body).map_err(CmdError::raw)?;
        engine
            .create(&sha, body, flags, skip)
            .map_err(CmdError::raw)?;
    }
    let Some(flags) = engine.scripts.get(&sha).map(|s| s.flags) else {
        return Err(CmdError::raw(NOSCRIPT_ERR));
    };
    ctx.srv.scripts.refresh_stats();
    let numkeys = numkeys as usize;
    run_script(ctx, Target::Eval(sha, flags), ro, numkeys)
}

enum Lent {
    Eval(engine::Engine),
    Functions(functions::FnState),
}

/// What runs: a cached script (its SHA and shebang flags) or a library's function.
pub(crate) enum Target {
    Eval(String, u32),
    Function(std::rc::Rc<functions::FunctionEntry>),
}

/// Runs a script or function whose arguments are checked: `ctx.args` is `[cmd, name,
/// numkeys, keys..., args...]`. Admission by the flags, then the run with the busy
/// machinery, the script's own client state and the log capture.
pub(crate) fn run_script(ctx: &mut Ctx, target: Target, ro: bool, numkeys: usize) -> CmdResult {
    let args = ctx.args;
    let flags = match &target {
        Target::Eval(_, f) => *f,
        Target::Function(f) => f.flags,
    };
    let compat = flags & engine::EVAL_COMPAT != 0;
    let may_write = !compat && flags & engine::NO_WRITES == 0;
    // A script that declares flags is admitted by them (Redis's scriptPrepareForRun): one
    // that may write is refused as a write would be.
    if may_write {
        if let Some(msg) = ctx.srv.aof.refuse_writes() {
            return Err(CmdError::raw(msg));
        }
        if ctx.srv.writes_denied_by_disk_error() {
            return Err(CmdError::raw(
                "MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk. Writable scripts are blocked. Use 'no-writes' flag for read only scripts.",
            ));
        }
        if ro {
            return Err(CmdError::err(
                "Can not execute a script with write flag using *_ro command.",
            ));
        }
    }
    let over_memory = ctx.srv.config.settings().maxmemory > 0
        && !ctx.srv.loading
        && ctx.srv.perform_evictions().is_err();
    if may_write && flags & engine::ALLOW_OOM == 0 && over_memory {
        return Err(CmdError::Oom);
    }
    let rules = ScriptRules {
        read_only: ro || flags & engine::NO_WRITES != 0,
        allow_oom: flags & (engine::ALLOW_OOM | engine::NO_WRITES) != 0,
        oom_at_start: over_memory,
    };
    let keys: Vec<&[u8]> = (3..3 + numkeys).map(|i| args.get(i)).collect();
    let argv: Vec<&[u8]> = (3 + numkeys..args.len()).map(|i| args.get(i)).collect();

    let is_function = matches!(target, Target::Function(_));
    // FUNCTION STATS names the running function and its command (copied for FCALL only).
    ctx.srv.scripts.running = match &target {
        Target::Function(f) => Some(Running {
            name: f.name.clone(),
            argv: (0..args.len()).map(|i| args.get(i).to_vec()).collect(),
            start: std::time::Instant::now(),
        }),
        Target::Eval(..) => None,
    };
    // The Lua state is lent to the run (its `redis.call` reaches `ctx`).
    let lent = if is_function {
        let Some(st) = ctx.srv.scripts.functions.state.take() else {
            return Err(CmdError::err("Lua engine unavailable"));
        };
        ctx.srv.scripts.functions.lent_vm_bytes = st.engine.used_memory();
        Lent::Functions(st)
    } else {
        let Some(engine) = ctx.srv.scripts.engine.take() else {
            return Err(CmdError::err("Lua engine unavailable"));
        };
        Lent::Eval(engine)
    };
    let engine: &engine::Engine = match &lent {
        Lent::Functions(st) => &st.engine,
        Lent::Eval(e) => e,
    };
    let busy = ctx.srv.scripts.busy.clone();
    busy.busy.store(false, Ordering::SeqCst);
    busy.kill.store(false, Ordering::SeqCst);
    busy.wrote.store(false, Ordering::SeqCst);
    busy.function.store(is_function, Ordering::SeqCst);
    let threshold = ctx.srv.config.settings().busy_reply_threshold.max(0) as u64;
    // The script's commands run as its own client would in Redis: its protocol, its
    // database (SELECT inside a script does not change the caller's), copied replies,
    // never blocking.
    let saved_resp = ctx.client.resp;
    let saved_db = ctx.client.db;
    let saved_cmd = (ctx.client.last_cmd, ctx.client.last_cmd_parent);
    let saved_refs_min = std::mem::replace(&mut ctx.srv.reply_refs_min, u64::MAX);
    let saved_deny = std::mem::replace(&mut ctx.srv.blocking.deny, true);
    ctx.srv.aof.script_capture = Some(Default::default());

    let lua = engine.lua.clone();
    if let Some(mut f) = lua.app_data_mut::<engine::RunFlags>() {
        f.rand = ctx.srv.scripts.rand;
    }
    let state = RefCell::new(CallCtx {
        ctx: &mut *ctx,
        rules,
        lua: lua.clone(),
    });
    let host = engine::RunHost {
        ctx: (&state as *const RefCell<CallCtx>).cast(),
        call: host_call,
        serve: host_serve,
    };
    let outcome = match &target {
        Target::Eval(sha, _) => engine.run(sha, &keys, &argv, host, threshold, busy.clone()),
        Target::Function(f) => engine.run_function(
            &f.name,
            &f.func,
            &keys,
            &argv,
            host,
            threshold,
            busy.clone(),
        ),
    };
    let script_resp = lua.app_data_ref::<engine::RunFlags>().map_or(2, |f| f.resp);
    if let Some(f) = lua.app_data_ref::<engine::RunFlags>() {
        ctx.srv.scripts.rand = f.rand;
    }

    ctx.client.resp = saved_resp;
    ctx.client.db = saved_db;
    (ctx.client.last_cmd, ctx.client.last_cmd_parent) = saved_cmd;
    ctx.srv.reply_refs_min = saved_refs_min;
    ctx.srv.blocking.deny = saved_deny;
    match lent {
        Lent::Functions(st) => ctx.srv.scripts.functions.state = Some(st),
        Lent::Eval(e) => ctx.srv.scripts.engine = Some(e),
    }
    busy.busy.store(false, Ordering::SeqCst);
    busy.kill.store(false, Ordering::SeqCst);
    ctx.srv.scripts.running = None;
    ctx.srv.scripts.refresh_stats();
    let captured = ctx.srv.aof.script_capture.take();
    // SHUTDOWN NOSAVE sent while the script was busy: the server stops now, as Redis
    // exits from inside the script: no reply, and the script's effects (logged only
    // when a script ends) never reach the log.
    if busy.shutdown.swap(false, Ordering::SeqCst) {
        ctx.srv.shutdown_nosave();
        // Empty effects, so the log gets neither the script's writes nor the EVAL.
        if !ctx.srv.loading {
            ctx.srv.aof.script_effects = Some(Default::default());
        }
        return Ok(());
    }
    if !ctx.srv.loading {
        ctx.srv.aof.script_effects = captured;
    }
    match outcome {
        Outcome::Ok(v) => {
            convert::lua_to_reply(&v, &mut ctx.out, script_resp);
            Ok(())
        }
        Outcome::Err(text) => Err(CmdError::raw(text)),
    }
}

/// `RunHost::call` of a run: `ctx` is `run_script`'s `&RefCell<CallCtx>`.
fn host_call(ctx: *const c_void, args: super::Args, out: &mut Vec<u8>) -> Result<(), String> {
    // SAFETY: the engine calls this only during the run `run_script` started with this
    // `ctx`, which points at its `state`, alive on its stack until the run returns.
    let state = unsafe { &*ctx.cast::<RefCell<CallCtx>>() };
    redis_call(state, args, out)
}

/// `RunHost::serve` of a run, called by the VM hook while the script is busy (never
/// inside `redis.call`, whose borrow makes it a no-op): the server answers other clients.
fn host_serve(ctx: *const c_void) {
    // SAFETY: as in `host_call`.
    let state = unsafe { &*ctx.cast::<RefCell<CallCtx>>() };
    if let Ok(mut st) = state.try_borrow_mut() {
        st.ctx.srv.serve_while_busy();
    }
}

/// `redis.call` and `redis.pcall`: runs one command for the script, its reply into
/// `out`. Err: the refusal's text.
fn redis_call(state: &RefCell<CallCtx>, cmd: super::Args, out: &mut Vec<u8>) -> Result<(), String> {
    let Ok(mut st) = state.try_borrow_mut() else {
        return Err("ERR This Redis command is not allowed from script".into());
    };
    let st = &mut *st;
    let (resp, repl) = st
        .lua
        .app_data_ref::<engine::RunFlags>()
        .map_or((2, engine::REPL_ALL), |f| (f.resp, f.repl));
    let rules = st.rules;
    let ctx = &mut *st.ctx;
    ctx.client.resp = if resp == 3 { Resp::V3 } else { Resp::V2 };
    let mark = ctx
        .srv
        .aof
        .script_capture
        .as_ref()
        .map_or(0, |c| c.entries.len());
    let dirty_before = ctx.srv.dirty;
    let now = ctx.now_ms;
    let ran = ctx.srv.execute_in_script(ctx.client, cmd, out, now, rules);
    if ctx.srv.dirty > dirty_before {
        ctx.srv.scripts.busy.wrote.store(true, Ordering::SeqCst);
    }
    // redis.set_repl without REPL_AOF: what this command changed is not logged.
    if repl & engine::REPL_AOF == 0 {
        if let Some(c) = ctx.srv.aof.script_capture.as_mut() {
            c.entries.truncate(mark);
        }
    }
    ran
}

fn script_load(ctx: &mut Ctx) -> CmdResult {
    let body = ctx.args.get(2);
    let sha = engine::sha1_hex(body);
    let engine = ctx.srv.scripts.engine()?;
    if !engine.scripts.contains_key(&sha) {
        let (flags, skip) = engine::shebang(body).map_err(CmdError::raw)?;
        engine
            .create(&sha, body, flags, skip)
            .map_err(CmdError::raw)?;
    }
    ctx.srv.scripts.refresh_stats();
    ctx.out.bulk(sha.as_bytes());
    Ok(())
}

fn script_exists(ctx: &mut Ctx) -> CmdResult {
    let n = ctx.args.len() - 2;
    ctx.out.array(n);
    for i in 2..ctx.args.len() {
        let sha = String::from_utf8_lossy(ctx.args.get(i)).to_ascii_lowercase();
        let found = ctx
            .srv
            .scripts
            .engine
            .as_ref()
            .is_some_and(|e| e.scripts.contains_key(&sha));
        ctx.out.int(found as i64);
    }
    Ok(())
}

fn script_flush(ctx: &mut Ctx) -> CmdResult {
    let ok = match ctx.args.len() {
        2 => true,
        3 => ctx.args.is(2, "sync") || ctx.args.is(2, "async"),
        _ => false,
    };
    if !ok {
        return Err(CmdError::err("SCRIPT FLUSH only support SYNC|ASYNC option"));
    }
    // The Lua state goes whole (scripts, globals they set, their memory); ASYNC frees it
    // here too (the state cannot leave this thread), which takes well under a
    // millisecond per thousand cached scripts.
    ctx.srv.scripts.engine = None;
    ctx.srv.scripts.refresh_stats();
    ctx.out.ok();
    Ok(())
}

/// SCRIPT KILL: while a script is busy the server serves it from the script's hook
/// (`io-threads 1`; I/O threads answer it themselves, `ScriptBusy::answer`); otherwise
/// nothing runs.
fn script_kill(ctx: &mut Ctx) -> CmdResult {
    kill_running(ctx, false)
}

/// SCRIPT KILL (`function_kill` false) or FUNCTION KILL.
pub(crate) fn kill_running(ctx: &mut Ctx, function_kill: bool) -> CmdResult {
    let busy = &ctx.srv.scripts.busy;
    if !busy.in_busy() {
        return Err(CmdError::raw("NOTBUSY No scripts in execution right now."));
    }
    busy.kill(function_kill).map_err(CmdError::raw)?;
    ctx.out.ok();
    Ok(())
}

fn script_debug(ctx: &mut Ctx) -> CmdResult {
    if ctx.args.is(2, "no") {
        ctx.out.ok();
        return Ok(());
    }
    if ctx.args.is(2, "yes") || ctx.args.is(2, "sync") {
        return Err(CmdError::err(
            "SCRIPT DEBUG (the Lua debugger) is not supported by this server",
        ));
    }
    Err(CmdError::err("Use SCRIPT DEBUG YES/SYNC/NO"))
}

fn script_help(ctx: &mut Ctx) -> CmdResult {
    const LINES: &[&str] = &[
        "SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "DEBUG (YES|SYNC|NO)",
        "    Only NO (the default) is accepted: the Lua debugger is not available.",
        "EXISTS <sha1> [<sha1> ...]",
        "    Return information about the existence of the scripts in the script cache.",
        "FLUSH [ASYNC|SYNC]",
        "    Flush the Lua scripts cache.",
        "KILL",
        "    Kill the currently executing Lua script.",
        "LOAD <script>",
        "    Load a script into the scripts cache without executing it.",
        "HELP",
        "    Print this help.",
    ];
    ctx.out.array(LINES.len());
    for l in LINES {
        ctx.out.simple(l);
    }
    Ok(())
}
