//! The Lua 5.1 state scripts run in, as Redis 7 sets it up: the libraries (base without
//! the file and module functions, `table`, `string`, `math` with Redis's PRNG, `bit`,
//! `struct`, `cjson`, `cmsgpack`, `os.clock`), the `redis` table, read-only globals and
//! library tables (`Script attempted to access nonexistent global variable`, `Attempt to
//! modify a readonly table`), the error handler that gives errors their
//! `script: <sha>, on @user_script:<line>.` tail, and the script cache.
//!
//! What a script does to the data (`redis.call`) is not here: the caller passes the
//! function that runs a command (see `mod.rs`), so this file knows nothing of the server.

use super::lualib::{self, raise_at, raise_reply, ReplyError};
use super::raw_call;
use mlua::{
    ffi, Function, HookTriggers, Lua, LuaOptions, MultiValue, StdLib, Table, Value, VmState,
};
use std::cell::Cell;
use std::collections::HashMap;
use std::ffi::c_void;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

// Script flags (Redis's SCRIPT_FLAG_*), from the shebang.
pub const NO_WRITES: u32 = 1 << 0;
pub const ALLOW_OOM: u32 = 1 << 1;
pub const ALLOW_STALE: u32 = 1 << 2;
pub const NO_CLUSTER: u32 = 1 << 3;
pub const ALLOW_CROSS_SLOT: u32 = 1 << 4;
/// No shebang: Redis's "eval compatibility mode" (the script may write, and is checked
/// command by command).
pub const EVAL_COMPAT: u32 = 1 << 5;

const FLAG_NAMES: &[(&str, u32)] = &[
    ("no-writes", NO_WRITES),
    ("allow-oom", ALLOW_OOM),
    ("allow-stale", ALLOW_STALE),
    ("no-cluster", NO_CLUSTER),
    ("allow-cross-slot-keys", ALLOW_CROSS_SLOT),
];

// redis.set_repl flags.
pub const REPL_AOF: u32 = 1;
pub const REPL_REPLICA: u32 = 2;
pub const REPL_ALL: u32 = REPL_AOF | REPL_REPLICA;

/// Memory the Lua state may take: past it an allocation fails and the script gets Lua's
/// "not enough memory" error instead of the process running out.
pub const LUA_MEMORY_LIMIT: usize = 1 << 30;
/// How often (in VM instructions) a running script checks its clock and the kill flag.
const HOOK_EVERY: u32 = 10_000;
/// Chunk name of the engine's own Lua code (the error handler skips its frames).
const INTERNAL: &str = "=cairn_internal";

/// A script flag's bit by name (any case, as `redis.register_function` reads them).
pub fn flag_bit(name: &str) -> Option<u32> {
    FLAG_NAMES
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, b)| *b)
}

/// The names of the flags set in `flags`, in Redis's order.
pub fn flag_names(flags: u32) -> Vec<&'static str> {
    FLAG_NAMES
        .iter()
        .filter(|(_, b)| flags & b != 0)
        .map(|(n, _)| *n)
        .collect()
}

/// Parses `#!lua flags=...` (Redis's evalExtractShebangFlags). Returns the flags and how
/// many bytes of the body the shebang line takes (its newline stays, so line numbers
/// match the user's text).
pub fn shebang(body: &[u8]) -> Result<(u32, usize), String> {
    if !body.starts_with(b"#!") {
        return Ok((EVAL_COMPAT, 0));
    }
    let Some(end) = body.iter().position(|&b| b == b'\n') else {
        return Err("ERR Invalid script shebang".into());
    };
    let line = String::from_utf8_lossy(&body[..end]);
    let parts: Vec<&str> = line.split_ascii_whitespace().collect();
    let Some(engine) = parts.first() else {
        return Err("ERR Invalid engine in script shebang".into());
    };
    if *engine != "#!lua" {
        return Err(format!("ERR Unexpected engine in script shebang: {engine}"));
    }
    let mut flags = 0;
    for part in &parts[1..] {
        let Some(list) = part.strip_prefix("flags=") else {
            return Err(format!("ERR Unknown lua shebang option: {part}"));
        };
        for f in list.split(',').filter(|f| !f.is_empty()) {
            match FLAG_NAMES.iter().find(|(n, _)| *n == f) {
                Some((_, bit)) => flags |= bit,
                None => return Err(format!("ERR Unexpected flag in script shebang: {f}")),
            }
        }
    }
    Ok((flags, end))
}

/// Lowercase hex SHA-1 (script names, `redis.sha1hex`).
pub fn sha1_hex(data: &[u8]) -> String {
    use sha1::Digest;
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let d = sha1::Sha1::digest(data);
    let mut s = String::with_capacity(40);
    for b in d.iter() {
        s.push(HEX[(b >> 4) as usize] as char);
        s.push(HEX[(b & 15) as usize] as char);
    }
    s
}

/// Redis's `redisLrand48` (the 48-bit linear congruential generator of `lrand48`), which
/// `math.random` uses. As in Redis 7.0 it is one sequence for the server's lifetime (not
/// reseeded per script, nor by SCRIPT FLUSH), starting from `lrand48`'s initial state;
/// `math.randomseed(n)` reseeds it.
#[derive(Clone, Copy)]
pub struct Lrand48(u64);

impl Default for Lrand48 {
    /// The initial state of `lrand48` (0x1234ABCD330E), what Redis starts from.
    fn default() -> Lrand48 {
        Lrand48(0x1234_ABCD_330E)
    }
}

impl Lrand48 {
    pub fn seeded(seed: i32) -> Lrand48 {
        Lrand48(((seed as u32 as u64) << 16) | 0x330E)
    }
    pub fn next_i32(&mut self) -> i32 {
        self.0 = (self.0.wrapping_mul(0x5DEECE66D).wrapping_add(0xB)) & ((1u64 << 48) - 1);
        (self.0 >> 17) as i32
    }
}

/// State of the script being run that the `redis` functions change.
pub struct RunFlags {
    /// `redis.setresp`: the protocol of the replies `redis.call` converts.
    pub resp: u8,
    /// `redis.set_repl`.
    pub repl: u32,
    pub rand: Lrand48,
}

/// A running script's state shared with the threads that answer other clients while it
/// runs (Redis's BUSY state, see `ScriptBusy::answer`): set by the VM hook and by the
/// executor, read (and `kill` / `shutdown` set) by I/O threads.
#[derive(Default, Debug)]
pub struct ScriptBusy {
    /// The script has run past `busy-reply-threshold`: other clients get `-BUSY`.
    pub busy: AtomicBool,
    /// SCRIPT KILL (or SHUTDOWN NOSAVE) asked the script to stop.
    pub kill: AtomicBool,
    /// The script changed data (SCRIPT KILL then answers UNKILLABLE).
    pub wrote: AtomicBool,
    /// SHUTDOWN NOSAVE arrived while the script ran.
    pub shutdown: AtomicBool,
    /// The running script is a function (FCALL): FUNCTION KILL stops it, SCRIPT KILL
    /// does not, and the BUSY text names FUNCTION KILL.
    pub function: AtomicBool,
}

/// The reply to SCRIPT KILL sent while the script ran past the threshold.
pub const UNKILLABLE: &str = "UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.";
pub const BUSY: &str =
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";
pub const BUSY_FUNCTION: &str =
    "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.";

impl ScriptBusy {
    pub fn in_busy(&self) -> bool {
        self.busy.load(Ordering::SeqCst)
    }

    /// SCRIPT KILL (`function_kill` false) or FUNCTION KILL while a script is busy, as
    /// Redis's scriptKill: a script that wrote is UNKILLABLE; SCRIPT KILL stops EVAL,
    /// FUNCTION KILL stops FCALL, and the other answers BUSY naming the right one.
    pub fn kill(&self, function_kill: bool) -> Result<(), &'static str> {
        if self.wrote.load(Ordering::SeqCst) {
            return Err(UNKILLABLE);
        }
        let function = self.function.load(Ordering::SeqCst);
        if function_kill != function {
            return Err(self.busy_error());
        }
        self.kill.store(true, Ordering::SeqCst);
        crate::warning!("Lua script killed by user with SCRIPT KILL.");
        Ok(())
    }

    /// The `-BUSY` text for the running script (SCRIPT KILL's or FUNCTION KILL's).
    pub fn busy_error(&self) -> &'static str {
        if self.function.load(Ordering::SeqCst) {
            BUSY_FUNCTION
        } else {
            BUSY
        }
    }

    /// A client's command while a script is busy: SCRIPT KILL stops it (unless it
    /// wrote), SHUTDOWN NOSAVE stops it and the server (no reply: the connection closes
    /// when the server exits), everything else is refused with `-BUSY`.
    pub fn answer(&self, argv: &[&[u8]]) -> Vec<u8> {
        let is = |i: usize, w: &str| {
            argv.get(i)
                .is_some_and(|a| a.eq_ignore_ascii_case(w.as_bytes()))
        };
        let line = |s: &str| format!("{s}\r\n").into_bytes();
        let busy = self.busy_error();
        let script_kill = is(0, "script");
        if argv.len() == 2 && (script_kill || is(0, "function")) && is(1, "kill") {
            return match self.kill(!script_kill) {
                Ok(()) => line("+OK"),
                Err(e) => line(&format!("-{e}")),
            };
        }
        if argv.len() >= 2 && is(0, "shutdown") && (1..argv.len()).any(|i| is(i, "nosave")) {
            self.shutdown.store(true, Ordering::SeqCst);
            self.kill.store(true, Ordering::SeqCst);
            return Vec::new();
        }
        line(&format!("-{busy}"))
    }
}

/// How often a busy script lets the server answer other clients (Redis calls its
/// processEventsWhileBlocked from every hook call once a script is busy).
const SERVE_EVERY: Duration = Duration::from_millis(2);

/// What `redis.call` / `redis.pcall` and the busy hook reach during a run: the caller's
/// context, type-erased (it lives on the caller's stack for the run), and its handlers.
/// `serve` is called every [`SERVE_EVERY`] once the script is busy, so the server answers
/// other clients meanwhile (`-BUSY`, SCRIPT KILL, SHUTDOWN NOSAVE).
#[derive(Clone, Copy)]
pub struct RunHost {
    pub ctx: *const c_void,
    /// Runs one command for the script, its reply (an error reply included) into the
    /// buffer. Err: the refusal's text (code included), raised or returned by the script.
    pub call: fn(*const c_void, crate::commands::Args<'_>, &mut Vec<u8>) -> Result<(), String>,
    pub serve: fn(*const c_void),
}

/// The running script as the VM hook sees it.
struct HookRun {
    busy: Arc<ScriptBusy>,
    serve: bool,
    /// When `serve` last ran.
    served: Instant,
    /// A function (FCALL): the slow-script line names FUNCTION KILL.
    function: bool,
    slow_logged: bool,
    start: Instant,
    threshold_ms: u64,
    name: String,
    /// FUNCTION LOAD's time limit: past it the library's code is stopped.
    load_deadline: Option<Instant>,
}

pub struct Script {
    pub func: Function,
    pub flags: u32,
    pub body_len: usize,
}

pub struct Engine {
    pub lua: Lua,
    /// The real globals (KEYS and ARGV are set here); scripts see them through `env`.
    real: Table,
    /// The read-only view scripts get as their globals.
    env: Table,
    /// The real `redis` table.
    redis: Table,
    /// `run(f)`: `xpcall(f, handler)`.
    runner: Function,
    pub scripts: HashMap<String, Script>,
    /// The running script, as the VM hook sees it (None between runs).
    hook: Rc<std::cell::RefCell<Option<HookRun>>>,
    /// `redis.call`'s state: the running script's host (None between runs), its buffers.
    site: Rc<raw_call::CallSite>,
    /// The buffer of the last run's `HookRun::name`.
    spare_name: Cell<String>,
    memory_limit: usize,
    /// Bytes of the cached scripts' bodies (INFO `used_memory_scripts_eval`).
    pub scripts_bytes: usize,
}

/// One run: a cached script (KEYS / ARGV as globals) or a library's function (keys and
/// args as its two arguments).
struct Run<'a> {
    name: &'a str,
    func: &'a Function,
    keys: &'a [&'a [u8]],
    args: &'a [&'a [u8]],
    as_function: bool,
}

/// What a run ended with.
pub enum Outcome {
    /// The script's first return value.
    Ok(Value),
    /// An error reply: full text (code included), without the leading '-'.
    Err(String),
}

impl Engine {
    pub fn new() -> mlua::Result<Engine> {
        Engine::with_memory_limit(LUA_MEMORY_LIMIT)
    }

    pub fn with_memory_limit(limit: usize) -> mlua::Result<Engine> {
        // SAFETY (of `unsafe_new_with`): the debug library is loaded only so that the
        // engine's error handler can read where an error happened; the handler keeps
        // `debug.getinfo` in a local and `debug` is removed from the globals scripts see.
        let lua = unsafe {
            Lua::unsafe_new_with(
                StdLib::TABLE | StdLib::STRING | StdLib::MATH | StdLib::DEBUG,
                LuaOptions::default(),
            )
        };
        lua.set_memory_limit(limit)?;
        lua.set_app_data(RunFlags {
            resp: 2,
            repl: REPL_ALL,
            rand: Lrand48::default(),
        });
        let real = lua.globals();
        let debug: Table = real.raw_get("debug")?;
        let getinfo: Function = debug.raw_get("getinfo")?;
        let setfenv: Function = real.raw_get("setfenv")?;
        for name in [
            "debug", "print", "setfenv", "getfenv", "module", "require", "dofile", "loadfile",
            "newproxy", "package", "io", "os",
        ] {
            real.raw_set(name, Value::Nil)?;
        }
        // Libraries Redis adds.
        real.raw_set("bit", lualib::bit_table(&lua)?)?;
        real.raw_set("struct", lualib::struct_table(&lua)?)?;
        real.raw_set("cjson", super::cjson::table(&lua)?)?;
        real.raw_set("cmsgpack", super::cmsgpack::table(&lua)?)?;
        let os = lua.create_table()?;
        os.raw_set(
            "clock",
            // C's clock() (glibc reads the same clock), as Lua's os.clock: the process's CPU
            // time in seconds.
            lua.create_function(|_, ()| {
                let mut ts = libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 0,
                };
                // SAFETY: `ts` is a valid timespec the call fills.
                let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
                if rc != 0 {
                    return Ok(-1.0);
                }
                Ok(ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9)
            })?,
        )?;
        real.raw_set("os", os)?;
        install_math(&lua, &real)?;
        let redis = redis_table(&lua)?;
        real.raw_set("redis", redis.clone())?;

        // rawset refuses the read-only views (a Rust function, as Redis's is C: errors
        // point at the calling line even from `return rawset(...)`).
        real.raw_set(
            "rawset",
            lua.create_function(|lua, (t, k, v): (Value, Value, Value)| {
                let Value::Table(t) = t else {
                    return Err(lualib::arg_error(lua, 1, "rawset", "table expected"));
                };
                let ro = t
                    .metatable()
                    .is_some_and(|m| m.raw_get::<bool>("__cairn_ro").unwrap_or(false));
                if ro {
                    return Err(mlua::Error::RuntimeError(
                        "Attempt to modify a readonly table".into(),
                    ));
                }
                t.raw_set(k, v)?;
                Ok(t)
            })?,
        )?;
        // setmetatable as the base library's, refusing the read-only views as Redis does.
        real.raw_set(
            "setmetatable",
            lua.create_function(|lua, args: mlua::Variadic<Value>| {
                let t = match args.first() {
                    Some(Value::Table(t)) => t.clone(),
                    other => {
                        return Err(lualib::arg_error(
                            lua,
                            1,
                            "setmetatable",
                            &format!("table expected, got {}", lualib::type_name(other)),
                        ))
                    }
                };
                let mt = match args.get(1) {
                    Some(Value::Nil) => None,
                    Some(Value::Table(m)) => Some(m.clone()),
                    _ => {
                        return Err(lualib::arg_error(
                            lua,
                            2,
                            "setmetatable",
                            "nil or table expected",
                        ))
                    }
                };
                if let Some(cur) = t.metatable() {
                    if cur.raw_get::<bool>("__cairn_ro").unwrap_or(false) {
                        return Err(mlua::Error::RuntimeError(
                            "Attempt to modify a readonly table".into(),
                        ));
                    }
                    if !matches!(cur.raw_get::<Value>("__metatable"), Ok(Value::Nil)) {
                        return Err(raise_at(lua, "cannot change a protected metatable"));
                    }
                }
                t.set_metatable(mt)?;
                Ok(t)
            })?,
        )?;
        let errinfo = lua.create_function(|lua, v: Value| {
            let (kind, text) = error_parts(&v);
            Ok((kind, lua.create_string(text)?))
        })?;
        let setup: Function = lua.load(SETUP_LUA).set_name(INTERNAL).into_function()?;
        let (env, runner): (Table, Function) =
            setup.call((real.clone(), getinfo, errinfo, setfenv))?;
        // One hook for the state's life (every run only fills `hook`): it checks the
        // running script's kill flag and clock.
        let hook: Rc<std::cell::RefCell<Option<HookRun>>> = Rc::default();
        let seen = hook.clone();
        // `redis.call` and `redis.pcall` for the state's life: they reach the running
        // script's context through `host` (set for each run).
        let site: Rc<raw_call::CallSite> = Rc::default();
        for (name, raise) in [("call", true), ("pcall", false)] {
            // SAFETY: the engine owns `site` for the state's life (the state is dropped
            // with the engine; a run never outlives it).
            let f = unsafe { raw_call::create(&lua, Rc::as_ptr(&site), raise)? };
            redis.raw_set(name, f)?;
        }
        let host_seen = site.clone();
        lua.set_hook(
            HookTriggers::new().every_nth_instruction(HOOK_EVERY),
            move |_, _| {
                let Ok(mut run) = seen.try_borrow_mut() else {
                    return Ok(VmState::Continue);
                };
                let Some(run) = run.as_mut() else {
                    return Ok(VmState::Continue);
                };
                if run.load_deadline.is_some_and(|d| Instant::now() >= d) {
                    return Err(raise_reply("ERR FUNCTION LOAD timeout"));
                }
                if !run.slow_logged && run.threshold_ms > 0 {
                    let elapsed = run.start.elapsed().as_millis() as u64;
                    if elapsed >= run.threshold_ms {
                        run.slow_logged = true;
                        run.busy.busy.store(true, Ordering::SeqCst);
                        crate::warning!(
                            "Slow script detected: still in execution after {elapsed} milliseconds. You can try killing the script using the {} command. Script name is: {}.",
                            if run.function { "FUNCTION KILL" } else { "SCRIPT KILL" },
                            run.name
                        );
                        // Serve at once, as Redis does when a script turns busy.
                        run.served = run.start;
                    }
                }
                // Busy: the server reads other clients and answers them (their SCRIPT
                // KILL sets the flag checked below).
                if run.serve && run.busy.in_busy() {
                    if let Some(h) = host_seen.host.get() {
                        let now = Instant::now();
                        if now.duration_since(run.served) >= SERVE_EVERY {
                            (h.serve)(h.ctx);
                            run.served = Instant::now();
                        }
                    }
                }
                if run.busy.kill.load(Ordering::SeqCst) {
                    // Redis's text for functions too.
                    return Err(raise_reply("ERR Script killed by user with SCRIPT KILL..."));
                }
                Ok(VmState::Continue)
            },
        )?;
        Ok(Engine {
            lua,
            real,
            env,
            redis,
            runner,
            scripts: HashMap::new(),
            hook,
            site,
            spare_name: Cell::default(),
            memory_limit: limit,
            scripts_bytes: 0,
        })
    }

    /// Compiles `body` (shebang already parsed) as script `sha` and caches it.
    pub fn create(
        &mut self,
        sha: &str,
        body: &[u8],
        flags: u32,
        shebang_len: usize,
    ) -> Result<(), String> {
        let code = &body[shebang_len..];
        // Bytecode is never loaded (Lua 5.1 does not verify it): Redis's Lua parses it as
        // text, which fails on its first byte.
        if code.first() == Some(&0x1b) {
            return Err(
                "ERR Error compiling script (new function): user_script:1: unexpected symbol near 'char(27)'"
                    .into(),
            );
        }
        let func = self
            .lua
            .load(code)
            .set_mode(mlua::chunk::ChunkMode::Text)
            .set_name("@user_script")
            .set_environment(self.env.clone())
            .into_function()
            .map_err(|e| {
                let msg = match &e {
                    mlua::Error::SyntaxError { message, .. } => message.clone(),
                    other => error_parts(&Value::Error(Box::new(other.clone()))).1,
                };
                format!("ERR Error compiling script (new function): {msg}")
            })?;
        self.scripts_bytes += body.len();
        self.scripts.insert(
            sha.to_string(),
            Script {
                func,
                flags,
                body_len: body.len(),
            },
        );
        Ok(())
    }

    /// Runs script `sha` with `keys` and `args`. `host` is what `redis.call` and
    /// `redis.pcall` reach for this run (the data); `threshold_ms` is when the
    /// script counts as slow (logged once, and other clients get `-BUSY`), `busy` what
    /// it shares with them (its kill switch).
    #[allow(clippy::too_many_arguments)]
    pub fn run(
        &self,
        sha: &str,
        keys: &[&[u8]],
        args: &[&[u8]],
        host: RunHost,
        threshold_ms: u64,
        busy: Arc<ScriptBusy>,
    ) -> Outcome {
        let Some(script) = self.scripts.get(sha) else {
            return Outcome::Err("NOSCRIPT No matching script. Please use EVAL.".into());
        };
        let run = Run {
            name: sha,
            func: &script.func,
            keys,
            args,
            as_function: false,
        };
        self.run_with(run, host, threshold_ms, busy)
    }

    /// Runs a function of a library (FCALL): `func(keys, args)`, errors ending in
    /// `script: <name>, on @user_function:<line>.`.
    #[allow(clippy::too_many_arguments)]
    pub fn run_function(
        &self,
        name: &str,
        func: &Function,
        keys: &[&[u8]],
        args: &[&[u8]],
        host: RunHost,
        threshold_ms: u64,
        busy: Arc<ScriptBusy>,
    ) -> Outcome {
        let run = Run {
            name,
            func,
            keys,
            args,
            as_function: true,
        };
        self.run_with(run, host, threshold_ms, busy)
    }

    fn run_with(
        &self,
        run: Run,
        host: RunHost,
        threshold_ms: u64,
        busy: Arc<ScriptBusy>,
    ) -> Outcome {
        let name = run.name;
        if let Some(mut f) = self.lua.app_data_mut::<RunFlags>() {
            f.resp = 2;
            f.repl = REPL_ALL;
        }
        if let Ok(mut h) = self.hook.try_borrow_mut() {
            // The name's buffer is the last run's (no allocation per run).
            let mut name_buf = self.spare_name.take();
            name_buf.clear();
            name_buf.push_str(name);
            let now = Instant::now();
            *h = Some(HookRun {
                function: run.as_function,
                serve: true,
                served: now,
                busy,
                slow_logged: false,
                start: now,
                threshold_ms,
                name: name_buf,
                load_deadline: None,
            });
        }
        self.site.start_run(host);
        let result = self.call_raw(&run);
        self.site.end_run();
        if let Some(panic) = self.site.take_panic() {
            std::panic::resume_unwind(panic);
        }
        if let Ok(mut h) = self.hook.try_borrow_mut() {
            if let Some(r) = h.take() {
                self.spare_name.set(r.name);
            }
        }
        // Lua 5.1 does not collect when an allocation fails: a script that ran out of
        // memory (or came close) leaves its garbage to a full collection here, so the
        // next script starts with room.
        if self.lua.used_memory() > self.memory_limit / 2 {
            let _ = self.lua.gc_collect();
        }
        match result {
            Ok((true, v)) => Outcome::Ok(v),
            Ok((false, Value::Table(t))) => Outcome::Err(error_reply_of(name, &t)),
            Ok((false, other)) => {
                let (_, msg) = error_parts(&other);
                let msg: String = msg.chars().take(100).collect();
                Outcome::Err(format!("ERR Error running script {name}, {msg}"))
            }
            Err(e) => {
                let (_, msg) = error_parts(&Value::Error(Box::new(e)));
                Outcome::Err(format!("ERR Error running script {name}, {msg}"))
            }
        }
    }

    /// The run itself in one protected call into the state (each of mlua's API calls is
    /// one, and a script's run is short): KEYS and ARGV built with Lua's C API (globals
    /// for a script, arguments for a function), `runner(f, ...)` (xpcall with the error
    /// handler), KEYS and ARGV cleared (they can be big). Returns runner's (ok, value).
    fn call_raw(&self, run: &Run) -> mlua::Result<(bool, Value)> {
        let as_function = run.as_function;
        let (keys, args) = (run.keys, run.args);
        // SAFETY: the closure uses the stack exec_raw gives it ([runner, f, globals]) within
        // the room it checks; Lua errors raised inside (out of memory) unwind to the
        // protected call around it, past this closure's frame, which owns nothing.
        unsafe {
            self.lua.exec_raw(
                (&self.runner, run.func, &self.real),
                move |state: *mut ffi::lua_State| {
                    // Room for the tables, a key, a value and runner's call and results.
                    if ffi::lua_checkstack(state, 8) == 0 {
                        ffi::lua_settop(state, 0);
                        ffi::lua_pushboolean(state, 0);
                        ffi::lua_pushstring(state, c"stack overflow".as_ptr());
                        return;
                    }
                    let push_array = |items: &[&[u8]]| {
                        ffi::lua_createtable(state, items.len().min(i32::MAX as usize) as i32, 0);
                        for (i, item) in items.iter().enumerate() {
                            ffi::lua_pushlstring(state, item.as_ptr().cast(), item.len());
                            ffi::lua_rawseti(state, -2, (i + 1) as ffi::lua_Integer);
                        }
                    };
                    push_array(keys); // 4
                    push_array(args); // 5
                    if as_function {
                        ffi::lua_pushvalue(state, 1);
                        ffi::lua_pushvalue(state, 2);
                        ffi::lua_pushvalue(state, 4);
                        ffi::lua_pushvalue(state, 5);
                        ffi::lua_call(state, 3, 2);
                    } else {
                        ffi::lua_pushstring(state, c"KEYS".as_ptr());
                        ffi::lua_pushvalue(state, 4);
                        ffi::lua_rawset(state, 3);
                        ffi::lua_pushstring(state, c"ARGV".as_ptr());
                        ffi::lua_pushvalue(state, 5);
                        ffi::lua_rawset(state, 3);
                        ffi::lua_pushvalue(state, 1);
                        ffi::lua_pushvalue(state, 2);
                        ffi::lua_call(state, 1, 2);
                        ffi::lua_pushstring(state, c"KEYS".as_ptr());
                        ffi::lua_pushnil(state);
                        ffi::lua_rawset(state, 3);
                        ffi::lua_pushstring(state, c"ARGV".as_ptr());
                        ffi::lua_pushnil(state);
                        ffi::lua_rawset(state, 3);
                    }
                    // Only (ok, value) stay: they are what exec_raw returns.
                    ffi::lua_replace(state, 2);
                    ffi::lua_replace(state, 1);
                    ffi::lua_settop(state, 2);
                },
            )
        }
    }

    /// Runs a library's code at FUNCTION LOAD (no arguments, no `redis.call`), stopped
    /// after `timeout_ms`. Err: the error's reply text (`ERR ...`).
    pub fn run_load(&self, func: &Function, timeout_ms: u64) -> Result<(), String> {
        if let Ok(mut h) = self.hook.try_borrow_mut() {
            *h = Some(HookRun {
                function: false,
                serve: false,
                served: Instant::now(),
                busy: Arc::default(),
                slow_logged: true,
                start: Instant::now(),
                threshold_ms: 0,
                name: String::new(),
                load_deadline: Some(Instant::now() + std::time::Duration::from_millis(timeout_ms)),
            });
        }
        let result = self.runner.call::<(bool, Value)>(func.clone());
        if let Ok(mut h) = self.hook.try_borrow_mut() {
            *h = None;
        }
        if self.lua.used_memory() > self.memory_limit / 2 {
            let _ = self.lua.gc_collect();
        }
        match result {
            Ok((true, _)) => Ok(()),
            Ok((false, Value::Table(t))) => match t.raw_get::<Value>("err") {
                Ok(Value::String(s)) => Err(s.to_string_lossy()),
                _ => Err("ERR unknown error".into()),
            },
            Ok((false, other)) => Err(format!("ERR {}", error_parts(&other).1)),
            Err(e) => Err(format!("ERR {}", error_parts(&Value::Error(Box::new(e))).1)),
        }
    }

    /// Compiles a library's code (shebang line already cut, its newline kept) with the
    /// functions' globals `env`. Err: Redis's `Error compiling function: ...` text (without `ERR `).
    pub fn compile_library(&self, code: &[u8], env: &Table) -> Result<Function, String> {
        if code.first() == Some(&0x1b) {
            return Err(
                "Error compiling function: user_function:1: unexpected symbol near 'char(27)'"
                    .into(),
            );
        }
        self.lua
            .load(code)
            .set_mode(mlua::chunk::ChunkMode::Text)
            .set_name("@user_function")
            .set_environment(env.clone())
            .into_function()
            .map_err(|e| {
                let msg = match &e {
                    mlua::Error::SyntaxError { message, .. } => message.clone(),
                    other => error_parts(&Value::Error(Box::new(other.clone()))).1,
                };
                format!("Error compiling function: {msg}")
            })
    }

    /// The real globals and `redis` table (the functions' state builds its load-time
    /// globals and views on them).
    pub fn globals(&self) -> (&Table, &Table) {
        (&self.real, &self.redis)
    }

    /// Lua's own memory (INFO `used_memory_lua`).
    pub fn used_memory(&self) -> usize {
        self.lua.used_memory()
    }
}

/// The reply of an error table the handler built: `<err> script: <sha>, on <source>:<line>.`
fn error_reply_of(sha: &str, t: &Table) -> String {
    let err = match t.raw_get::<Value>("err") {
        Ok(Value::String(s)) => s.to_string_lossy(),
        _ => "ERR unknown error".to_string(),
    };
    let source: Option<String> = match t.raw_get::<Value>("source") {
        Ok(Value::String(s)) => Some(s.to_string_lossy()),
        _ => None,
    };
    let line: Option<i64> = match t.raw_get::<Value>("line") {
        Ok(Value::Integer(i)) => Some(i),
        Ok(Value::Number(n)) => Some(n as i64),
        _ => None,
    };
    let err = err.trim_end_matches(['\r', '\n']).to_string();
    match (source, line) {
        (Some(s), Some(l)) => format!("{err} script: {sha}, on {s}:{l}."),
        _ => err,
    }
}

/// An error value as ("table", reply text) for Redis's error tables (and errors raised
/// as such from Rust: [`ReplyError`]), or ("string", message) for everything else.
pub fn error_parts(v: &Value) -> (&'static str, String) {
    match v {
        Value::Error(e) => error_parts_of(e),
        Value::String(s) => ("string", s.to_string_lossy()),
        Value::Table(t) => match t.raw_get::<Value>("err") {
            Ok(Value::String(s)) => ("table", s.to_string_lossy()),
            _ => ("string", "unknown error".into()),
        },
        Value::Integer(i) => ("string", i.to_string()),
        Value::Number(n) => ("string", lualib::fmt_g(*n, 14)),
        Value::Nil => ("string", "nil".into()),
        Value::Boolean(b) => ("string", b.to_string()),
        other => ("string", other.type_name().to_string()),
    }
}

fn error_parts_of(e: &mlua::Error) -> (&'static str, String) {
    match e {
        mlua::Error::CallbackError { cause, .. } => error_parts_of(cause),
        mlua::Error::WithContext { cause, .. } => error_parts_of(cause),
        mlua::Error::RuntimeError(m) => ("string", m.clone()),
        mlua::Error::MemoryError(_) => ("string", "not enough memory".into()),
        mlua::Error::ExternalError(x) => match x.downcast_ref::<ReplyError>() {
            Some(r) => ("table", r.0.clone()),
            None => ("string", x.to_string()),
        },
        other => ("string", other.to_string()),
    }
}

/// `math.random` / `math.randomseed` on Redis's PRNG (Lua's own use the C library's).
fn install_math(lua: &Lua, real: &Table) -> mlua::Result<()> {
    let math: Table = real.raw_get("math")?;
    math.raw_set(
        "random",
        lua.create_function(|lua, args: mlua::Variadic<Value>| {
            const MAX: i64 = i32::MAX as i64;
            let r = match lua.app_data_mut::<RunFlags>() {
                Some(mut f) => f.rand.next_i32() as i64,
                None => 0,
            };
            let r = (r % MAX) as f64 / MAX as f64;
            match args.len() {
                0 => Ok(Value::Number(r)),
                1 => {
                    let u = lualib::check_number(lua, &args, 0, "random")?.floor();
                    if u < 1.0 {
                        return Err(lualib::arg_error(lua, 1, "random", "interval is empty"));
                    }
                    Ok(lualib::number((r * u).floor() + 1.0))
                }
                2 => {
                    let l = lualib::check_number(lua, &args, 0, "random")?.floor();
                    let u = lualib::check_number(lua, &args, 1, "random")?.floor();
                    if l > u {
                        return Err(lualib::arg_error(lua, 2, "random", "interval is empty"));
                    }
                    Ok(lualib::number((r * (u - l + 1.0)).floor() + l))
                }
                _ => Err(raise_at(lua, "wrong number of arguments")),
            }
        })?,
    )?;
    math.raw_set(
        "randomseed",
        lua.create_function(|lua, args: mlua::Variadic<Value>| {
            let seed = lualib::check_number(lua, &args, 0, "randomseed")? as i64 as i32;
            if let Some(mut f) = lua.app_data_mut::<RunFlags>() {
                f.rand = Lrand48::seeded(seed);
            }
            Ok(())
        })?,
    )?;
    Ok(())
}

fn single_field(lua: &Lua, field: &str, args: &MultiValue) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    match (args.len(), args.front()) {
        (1, Some(Value::String(s))) => {
            let text = if field == "err" {
                normalize_error(&s.as_bytes())
            } else {
                s.to_string_lossy()
            };
            t.raw_set(field, lua.create_string(text)?)?;
        }
        _ => t.raw_set("err", "ERR wrong number or type of arguments")?,
    }
    Ok(t)
}

/// Redis's luaPushErrorBuff: `-CODE msg` keeps its code, a text without one gets `ERR`.
pub fn normalize_error(text: &[u8]) -> String {
    let s = String::from_utf8_lossy(text);
    let s = s.as_ref();
    let (code, msg) = match s.strip_prefix('-') {
        Some(rest) => match rest.split_once(' ') {
            Some((c, m)) => (c.to_string(), m.to_string()),
            None => ("ERR".to_string(), rest.to_string()),
        },
        None => ("ERR".to_string(), s.to_string()),
    };
    let msg = msg.trim_matches(['\r', '\n']);
    format!("{code} {msg}")
}

fn redis_table(lua: &Lua) -> mlua::Result<Table> {
    let r = lua.create_table()?;
    r.raw_set(
        "error_reply",
        lua.create_function(|lua, args: MultiValue| {
            // Redis adds the '-' the text lacks, then reads the code from it.
            if let (1, Some(Value::String(s))) = (args.len(), args.front()) {
                let b = s.as_bytes();
                let mut t = Vec::with_capacity(b.len() + 1);
                if !b.starts_with(b"-") {
                    t.push(b'-');
                }
                t.extend_from_slice(&b);
                let tbl = lua.create_table()?;
                tbl.raw_set("err", lua.create_string(normalize_error(&t))?)?;
                return Ok(tbl);
            }
            single_field(lua, "err", &args)
        })?,
    )?;
    r.raw_set(
        "status_reply",
        lua.create_function(|lua, args: MultiValue| single_field(lua, "ok", &args))?,
    )?;
    r.raw_set(
        "sha1hex",
        lua.create_function(|lua, args: MultiValue| {
            if args.len() != 1 {
                return Err(raise_reply("ERR wrong number of arguments"));
            }
            let data = match &args[0] {
                Value::String(s) => s.as_bytes().to_vec(),
                Value::Integer(i) => i.to_string().into_bytes(),
                Value::Number(n) => lualib::fmt_g(*n, 14).into_bytes(),
                _ => Vec::new(),
            };
            lua.create_string(sha1_hex(&data))
        })?,
    )?;
    r.raw_set(
        "log",
        lua.create_function(|_, args: MultiValue| {
            if args.len() < 2 {
                return Err(raise_reply(
                    "ERR redis.log() requires two arguments or more.",
                ));
            }
            let level = match &args[0] {
                Value::Integer(i) => *i,
                Value::Number(n) => *n as i64,
                _ => {
                    return Err(raise_reply(
                        "ERR First argument must be a number (log level).",
                    ))
                }
            };
            if !(0..=3).contains(&level) {
                return Err(raise_reply("ERR Invalid debug level."));
            }
            let mut msg = String::new();
            for (i, v) in args.iter().skip(1).enumerate() {
                if i > 0 {
                    msg.push(' ');
                }
                match v {
                    Value::String(s) => msg.push_str(&s.to_string_lossy()),
                    Value::Integer(n) => msg.push_str(&n.to_string()),
                    Value::Number(n) => msg.push_str(&lualib::fmt_g(*n, 14)),
                    _ => {}
                }
            }
            let level = match level {
                0 => crate::log::Level::Debug,
                1 => crate::log::Level::Verbose,
                2 => crate::log::Level::Notice,
                _ => crate::log::Level::Warning,
            };
            crate::log::log(level, &msg);
            Ok(())
        })?,
    )?;
    r.raw_set(
        "setresp",
        lua.create_function(|lua, args: MultiValue| {
            if args.len() != 1 {
                return Err(raise_reply("ERR redis.setresp() requires one argument."));
            }
            let v = match &args[0] {
                Value::Integer(i) => *i,
                Value::Number(n) => *n as i64,
                _ => -1,
            };
            if v != 2 && v != 3 {
                return Err(raise_reply("ERR RESP version must be 2 or 3."));
            }
            if let Some(mut f) = lua.app_data_mut::<RunFlags>() {
                f.resp = v as u8;
            }
            Ok(())
        })?,
    )?;
    r.raw_set(
        "set_repl",
        lua.create_function(|lua, args: MultiValue| {
            if args.len() != 1 {
                return Err(raise_reply("ERR redis.set_repl() requires one argument."));
            }
            let v = match &args[0] {
                Value::Integer(i) => *i,
                Value::Number(n) => *n as i64,
                _ => -1,
            };
            if !(0..=REPL_ALL as i64).contains(&v) {
                return Err(raise_reply(
                    "ERR Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.",
                ));
            }
            if let Some(mut f) = lua.app_data_mut::<RunFlags>() {
                f.repl = v as u32;
            }
            Ok(())
        })?,
    )?;
    r.raw_set(
        "replicate_commands",
        lua.create_function(|_, _: MultiValue| Ok(true))?,
    )?;
    r.raw_set(
        "breakpoint",
        lua.create_function(|_, _: MultiValue| Ok(false))?,
    )?;
    r.raw_set("debug", lua.create_function(|_, _: MultiValue| Ok(()))?)?;
    for (k, v) in [
        ("LOG_DEBUG", 0),
        ("LOG_VERBOSE", 1),
        ("LOG_NOTICE", 2),
        ("LOG_WARNING", 3),
        ("REPL_NONE", 0),
        ("REPL_AOF", REPL_AOF as i64),
        ("REPL_SLAVE", REPL_REPLICA as i64),
        ("REPL_REPLICA", REPL_REPLICA as i64),
        ("REPL_ALL", REPL_ALL as i64),
    ] {
        r.raw_set(k, v)?;
    }
    r.raw_set("REDIS_VERSION", super::REDIS_VERSION)?;
    r.raw_set("REDIS_VERSION_NUM", super::REDIS_VERSION_NUM)?;
    Ok(r)
}

/// Builds the read-only views and the runner. Arguments: the real globals,
/// `debug.getinfo`, and `errinfo(e)` → kind, text for errors raised from Rust.
const SETUP_LUA: &str = r#"
local real, getinfo, errinfo, setfenv = ...
local error, type, tostring, rawequal = error, type, tostring, rawequal
local setmetatable, xpcall, pcall, select = setmetatable, xpcall, pcall, select
local function readonly() error('Attempt to modify a readonly table', 2) end
local function view(t, index)
  local v = {}
  setmetatable(v, {__index = index or t, __newindex = readonly, __metatable = false, __cairn_ro = true})
  return v
end
-- Library tables: scripts read them, never change them.
for _, name in ipairs({'string', 'table', 'math', 'redis', 'bit', 'struct', 'cjson', 'cmsgpack', 'os', 'coroutine'}) do
  if type(real[name]) == 'table' then real[name] = view(real[name]) end
end
-- Strings' shared metatable: methods come from the read-only string view, and
-- getmetatable('') answers a read-only view of the metatable itself.
local smt = getmetatable('')
smt.__index = real.string
smt.__metatable = view(smt)
local env = view(real)
setmetatable(real, {__index = function(_, k)
  error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
end})
real._G = env
local raw_loadstring = loadstring
real.loadstring = function(s, name)
  if type(s) == 'string' and s:byte(1) == 27 then
    return nil, 'binary chunks are not loaded'
  end
  local f, e = raw_loadstring(s, name)
  if f then setfenv(f, env) end
  return f, e
end
-- Redis's pcall hands the script the text of an error table, not the table.
local function fix(ok, ...)
  if ok then return true, ... end
  local e = ...
  if type(e) == 'userdata' then
    local kind, text = errinfo(e)
    e = text
  elseif type(e) == 'table' and type(e.err) == 'string' then
    e = e.err
  end
  return false, e
end
real.pcall = function(f, ...) return fix(pcall(f, ...)) end
local function handler(err)
  local info
  local level = 2
  while true do
    local i = getinfo(level, 'Sl')
    if not i then break end
    if i.what ~= 'C' and i.source ~= '=cairn_internal' then info = i break end
    level = level + 1
  end
  if type(err) == 'userdata' then
    local kind, text = errinfo(err)
    if kind == 'table' then err = {err = text} else err = text end
  end
  if type(err) ~= 'table' then err = {err = 'ERR ' .. tostring(err)} end
  if info then err.source = info.source err.line = info.currentline end
  return err
end
-- A function's run passes its keys and arguments through these upvalues (runs never
-- nest: FCALL is refused inside scripts), so no closure is built per call.
local cur_f, cur_k, cur_a
local function call_function() return cur_f(cur_k, cur_a) end
local function run(f, k, a)
  local ok, r
  if k == nil then
    ok, r = xpcall(f, handler)
  else
    cur_f, cur_k, cur_a = f, k, a
    ok, r = xpcall(call_function, handler)
    cur_f, cur_k, cur_a = nil, nil, nil
  end
  return ok, r
end
return env, run
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lrand48_matches_redis() {
        // Redis 7.0 after start: math.random() → 0.396... (sent as 0), math.random(10) →
        // 9, then `return tostring(math.random())` → 0.35333609737146.
        let mut r = Lrand48::default();
        let mut f = || (r.next_i32() as i64 % i32::MAX as i64) as f64 / i32::MAX as f64;
        assert!(f() < 1.0);
        assert_eq!((f() * 10.0).floor() + 1.0, 9.0);
        assert_eq!(lualib::fmt_g(f(), 14), "0.35333609737146");
        // `math.randomseed(1); return tostring(math.random())` → 0.041630344484761.
        let mut r = Lrand48::seeded(1);
        let v = (r.next_i32() as i64 % i32::MAX as i64) as f64 / i32::MAX as f64;
        assert_eq!(lualib::fmt_g(v, 14), "0.041630344484761");
    }

    /// A host whose `redis.call` returns nothing and whose `serve` does nothing.
    fn test_host() -> RunHost {
        RunHost {
            ctx: std::ptr::null(),
            call: |_, _, _| Ok(()),
            serve: |_| {},
        }
    }

    #[test]
    fn a_set_kill_flag_stops_a_running_script() {
        let mut e = Engine::with_memory_limit(64 << 20).unwrap();
        let body = b"local n = 0 while true do n = n + 1 end";
        let sha = sha1_hex(body);
        e.create(&sha, body, EVAL_COMPAT, 0).unwrap();
        let wd = Arc::new(ScriptBusy::default());
        wd.kill.store(true, Ordering::SeqCst);
        let out = e.run(&sha, &[], &[], test_host(), 0, wd);
        let Outcome::Err(msg) = out else {
            panic!("the script was not stopped")
        };
        assert_eq!(
            msg,
            format!(
                "ERR Script killed by user with SCRIPT KILL... script: {sha}, on @user_script:1."
            )
        );
    }

    #[test]
    fn shebang_flags() {
        assert_eq!(shebang(b"return 1").unwrap(), (EVAL_COMPAT, 0));
        assert_eq!(shebang(b"#!lua\nreturn 1").unwrap(), (0, 5));
        assert_eq!(
            shebang(b"#!lua flags=no-writes,allow-oom\nreturn 1")
                .unwrap()
                .0,
            NO_WRITES | ALLOW_OOM
        );
        assert_eq!(
            shebang(b"#!lua flags=bogus\nreturn 1").unwrap_err(),
            "ERR Unexpected flag in script shebang: bogus"
        );
        assert_eq!(
            shebang(b"#!lux\nreturn 1").unwrap_err(),
            "ERR Unexpected engine in script shebang: #!lux"
        );
        assert_eq!(shebang(b"#!lua").unwrap_err(), "ERR Invalid script shebang");
        assert_eq!(
            shebang(b"#!lua x=1\n").unwrap_err(),
            "ERR Unknown lua shebang option: x=1"
        );
    }

    #[test]
    fn error_texts_get_their_code() {
        assert_eq!(normalize_error(b"-MY bad"), "MY bad");
        assert_eq!(normalize_error(b"-bad"), "ERR bad");
        assert_eq!(normalize_error(b"plain text"), "ERR plain text");
    }

    #[test]
    fn sandbox_and_errors() {
        let mut e = Engine::with_memory_limit(64 << 20).unwrap();
        let run = |e: &mut Engine, body: &str| {
            let sha = sha1_hex(body.as_bytes());
            let (flags, skip) = shebang(body.as_bytes()).unwrap();
            e.create(&sha, body.as_bytes(), flags, skip)?;
            match e.run(&sha, &[], &[], test_host(), 0, Arc::default()) {
                Outcome::Ok(Value::String(s)) => Ok(s.to_string_lossy()),
                Outcome::Ok(v) => Ok(format!("{v:?}")),
                Outcome::Err(m) => Err(m.replace(&sha, "SHA")),
            }
        };
        assert_eq!(
            run(&mut e, "return x").unwrap_err(),
            "ERR user_script:1: Script attempted to access nonexistent global variable 'x' script: SHA, on @user_script:1."
        );
        assert_eq!(
            run(&mut e, "x = 1").unwrap_err(),
            "ERR user_script:1: Attempt to modify a readonly table script: SHA, on @user_script:1."
        );
        assert_eq!(
            run(&mut e, "string.x = 1").unwrap_err(),
            "ERR user_script:1: Attempt to modify a readonly table script: SHA, on @user_script:1."
        );
        assert_eq!(
            run(&mut e, "rawset(_G, 'x', 1)").unwrap_err(),
            "ERR Attempt to modify a readonly table script: SHA, on @user_script:1."
        );
        assert_eq!(
            run(&mut e, "error({err='MY boom'})").unwrap_err(),
            "MY boom script: SHA, on @user_script:1."
        );
        assert_eq!(
            run(&mut e, "\n\nerror('boom')").unwrap_err(),
            "ERR user_script:3: boom script: SHA, on @user_script:3."
        );
        assert!(run(&mut e, "return (").unwrap_err().starts_with(
            "ERR Error compiling script (new function): user_script:1: unexpected symbol near '<eof>'"
        ));
        for g in [
            "io", "require", "loadfile", "dofile", "debug", "print", "setfenv", "getfenv",
        ] {
            let err = run(&mut e, &format!("return {g}")).unwrap_err();
            assert!(err.contains("nonexistent global variable"), "{g}: {err}");
        }
        assert!(run(&mut e, "return os.clock()").is_ok());
        // Bytecode is refused, as a script and through loadstring.
        assert!(run(&mut e, "\x1bLuaQ")
            .unwrap_err()
            .contains("near 'char(27)'"));
        assert_eq!(
            run(
                &mut e,
                "return select(2, loadstring(string.dump(function() return 1 end)))"
            )
            .unwrap(),
            "binary chunks are not loaded"
        );
        assert!(run(&mut e, "return os.time()").is_err());
        let err = run(
            &mut e,
            "local function f(n) return f(n + 1) + 1 end return f(1)",
        )
        .unwrap_err();
        assert!(err.contains("stack overflow"), "{err}");
        let err = run(&mut e, "return cjson.decode('bad')").unwrap_err();
        assert_eq!(
            err,
            "ERR user_script:1: Expected value but found invalid token at character 1 script: SHA, on @user_script:1."
        );
        assert_eq!(
            run(&mut e, "local ok, e = pcall(cjson.decode, 'x') return e").unwrap(),
            "Expected value but found invalid token at character 1"
        );
        let err = run(
            &mut e,
            "local t = {} for i = 1, 1e9 do t[i] = string.rep('x', 2^20) .. i end",
        )
        .unwrap_err();
        assert!(err.contains("not enough memory"), "{err}");
        // The state still works after running out of memory.
        assert!(run(&mut e, "return 1").is_ok());
    }
}
