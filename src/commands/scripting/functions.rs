//! Redis 7 functions: FUNCTION LOAD | LIST | DELETE | FLUSH | DUMP | RESTORE | STATS |
//! KILL | HELP, FCALL, FCALL_RO (Redis's `functions.c`, `function_lua.c`).
//!
//! Libraries live in a Lua state of their own (SCRIPT FLUSH does not touch them). Their
//! code runs once at load, with globals that hold only a small `redis` table
//! (`register_function`, `log`, the log levels and the version): no `redis.call`, no
//! libraries. The registered callbacks keep the same globals table, whose `__index` then
//! points at the full runtime globals, so at FCALL they see everything an EVAL script
//! sees. FCALL finds its function in one hash lookup and calls the compiled callback:
//! nothing is compiled per call.
//!
//! Every change republishes the libraries as RDB function records (`published`): the
//! snapshot thread reads them at its cut, so images and RDB files carry them.

use super::engine::{self, Engine};
use super::{CmdError, CmdResult, CommandSpec, Ctx};
use crate::commands::{ALLOW_BUSY, DENYOOM, LOADING, MAY_REPLICATE, MONITOR_FIRST, NOSCRIPT};
use crate::commands::{NO_MANDATORY_KEYS, READONLY, SKIP_MONITOR, STALE, WRITE};
use crate::persistence::rdb_value;
use mlua::{Function, MultiValue, Table, Value};
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::sync::{Arc, Mutex};

/// How long a library's code may run at FUNCTION LOAD (Redis's LOAD_TIMEOUT_MS).
pub const LOAD_TIMEOUT_MS: u64 = 500;

/// The libraries as RDB function records (no footer), shared with the snapshot thread.
pub type PublishedLibraries = Arc<Mutex<Arc<Vec<u8>>>>;

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new("function", -2, 0, "scripting", function_help)
        .acl(0)
        .doc("A container for function commands.", "7.0.0")
        .subs(FUNCTION_SUBS),
    CommandSpec::new(
        "fcall",
        -3,
        NOSCRIPT | STALE | SKIP_MONITOR | MONITOR_FIRST | NO_MANDATORY_KEYS | MAY_REPLICATE,
        "scripting",
        fcall,
    )
    .doc("Invoke a function", "7.0.0"),
    CommandSpec::new(
        "fcall_ro",
        -3,
        NOSCRIPT | STALE | SKIP_MONITOR | MONITOR_FIRST | NO_MANDATORY_KEYS | READONLY,
        "scripting",
        fcall_ro,
    )
    .doc("Invoke a read-only function", "7.0.0"),
];

static FUNCTION_SUBS: &[CommandSpec] = &[
    CommandSpec::new(
        "load",
        -3,
        WRITE | DENYOOM | NOSCRIPT,
        "scripting",
        function_load,
    )
    .doc(
        "Create a function with the given arguments (name, code, description)",
        "7.0.0",
    ),
    CommandSpec::new("delete", 3, WRITE | NOSCRIPT, "scripting", function_delete)
        .doc("Delete a function by name", "7.0.0"),
    CommandSpec::new("flush", -2, WRITE | NOSCRIPT, "scripting", function_flush)
        .doc("Deleting all functions", "7.0.0"),
    CommandSpec::new("dump", 2, NOSCRIPT, "scripting", function_dump).doc(
        "Dump all functions into a serialized binary payload",
        "7.0.0",
    ),
    CommandSpec::new(
        "restore",
        -3,
        WRITE | DENYOOM | NOSCRIPT,
        "scripting",
        function_restore,
    )
    .doc("Restore all the functions on the given payload", "7.0.0"),
    CommandSpec::new("list", -2, NOSCRIPT, "scripting", function_list)
        .doc("List information about all the functions", "7.0.0"),
    CommandSpec::new(
        "stats",
        2,
        NOSCRIPT | ALLOW_BUSY,
        "scripting",
        function_stats,
    )
    .doc(
        "Return information about the function currently running (name, description, duration)",
        "7.0.0",
    ),
    CommandSpec::new("kill", 2, NOSCRIPT | ALLOW_BUSY, "scripting", function_kill)
        .doc("Kill the function currently in execution.", "7.0.0"),
    CommandSpec::new("help", 2, LOADING | STALE, "scripting", function_help)
        .doc("Show helpful text about the different subcommands", "7.0.0"),
];

/// A registered function.
pub struct FunctionEntry {
    pub name: String,
    pub func: Function,
    /// Script flags (`engine::NO_WRITES` ...).
    pub flags: u32,
    pub desc: Option<Vec<u8>>,
}

pub struct Library {
    pub name: String,
    /// The whole code as loaded, shebang included (FUNCTION LIST WITHCODE, DUMP, RDB).
    pub code: Vec<u8>,
    /// By name (FUNCTION LIST's order).
    pub functions: BTreeMap<String, Rc<FunctionEntry>>,
}

/// What `redis.register_function` collects while a library's code runs (None: not
/// loading, and the call is refused).
type Pending = Rc<RefCell<Option<Vec<FunctionEntry>>>>;

/// The functions' Lua state and what it needs beyond the engine.
pub(super) struct FnState {
    pub(super) engine: Engine,
    /// The globals every library's code and callbacks see.
    env: Table,
    /// `env`'s metatable: `__index` is the load-time API while a library loads, the
    /// runtime globals otherwise.
    env_mt: Table,
    load_api: Table,
    pending: Pending,
}

/// The libraries and their functions.
#[derive(Default)]
pub struct Functions {
    pub(super) state: Option<FnState>,
    pub libraries: BTreeMap<String, Library>,
    /// Every library's functions, keyed by lower-case name.
    pub functions: HashMap<String, Rc<FunctionEntry>>,
    pub published: PublishedLibraries,
    /// The Lua state's memory when it was lent to a running function (INFO from inside
    /// one).
    pub(super) lent_vm_bytes: usize,
}

fn valid_name(name: &[u8]) -> bool {
    !name.is_empty() && name.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_')
}

const BAD_NAME: &str = "Library names can only contain letters, numbers, or underscores(_) and must be at least one character long";

/// Reads the `#!lua name=<lib>` line (Redis's functionExtractLibMetaData). Returns the
/// library name and where the code after the shebang line starts (its newline kept, so
/// line numbers count the shebang line).
fn metadata(code: &[u8]) -> Result<(String, usize), String> {
    if !code.starts_with(b"#!") {
        return Err("Missing library metadata".into());
    }
    let Some(end) = code.iter().position(|&b| b == b'\n') else {
        return Err("Invalid library metadata".into());
    };
    let (mut buf, mut ranges) = (Vec::new(), Vec::new());
    if crate::util::split_args(&code[..end], &mut buf, &mut ranges).is_err() {
        return Err("Invalid library metadata".into());
    }
    let parts: Vec<&[u8]> = ranges.iter().map(|&(s, l)| &buf[s..s + l]).collect();
    let Some(first) = parts.first() else {
        return Err("Invalid library metadata".into());
    };
    let engine = String::from_utf8_lossy(&first[2.min(first.len())..]).into_owned();
    let mut name: Option<String> = None;
    for part in &parts[1..] {
        if part.len() >= 5 && part[..5].eq_ignore_ascii_case(b"name=") {
            if name.is_some() {
                return Err(
                    "Invalid metadata value, name argument was given multiple times".into(),
                );
            }
            name = Some(String::from_utf8_lossy(&part[5..]).into_owned());
            continue;
        }
        return Err(format!(
            "Invalid metadata value given: {}",
            String::from_utf8_lossy(part)
        ));
    }
    let Some(name) = name else {
        return Err("Library name was not given".into());
    };
    if !valid_name(name.as_bytes()) {
        return Err(BAD_NAME.into());
    }
    if !engine.eq_ignore_ascii_case("lua") {
        return Err(format!("Engine '{engine}' not found"));
    }
    Ok((name, end))
}

impl Functions {
    fn state(&mut self) -> Result<&mut FnState, String> {
        if self.state.is_none() {
            self.state = Some(new_state().map_err(|e| format!("Can't start the Lua engine: {e}"))?);
        }
        self.state
            .as_mut()
            .ok_or_else(|| "Lua engine unavailable".to_string())
    }

    /// Compiles and runs a library's code, collecting its functions (Redis's
    /// functionsCreateWithLibraryCtx up to the collision checks). `timeout_ms` 0: no limit.
    fn build(&mut self, code: &[u8], timeout_ms: u64) -> Result<Library, String> {
        let (name, skip) = metadata(code)?;
        let st = self.state()?;
        let func = st.engine.compile_library(&code[skip..], &st.env)?;
        st.env_mt
            .raw_set("__index", st.load_api.clone())
            .map_err(|e| e.to_string())?;
        *st.pending.borrow_mut() = Some(Vec::new());
        let limit = if timeout_ms == 0 {
            u64::MAX / 4
        } else {
            timeout_ms
        };
        let ran = st.engine.run_load(&func, limit);
        let registered = st.pending.borrow_mut().take().unwrap_or_default();
        let (real, _) = st.engine.globals();
        st.env_mt
            .raw_set("__index", real.clone())
            .map_err(|e| e.to_string())?;
        if let Err(e) = ran {
            return Err(format!("Error registering functions: {e}"));
        }
        if registered.is_empty() {
            return Err("No functions registered".into());
        }
        let mut functions = BTreeMap::new();
        for f in registered {
            functions.insert(f.name.clone(), Rc::new(f));
        }
        Ok(Library {
            name,
            code: code.to_vec(),
            functions,
        })
    }

    /// FUNCTION LOAD: Err is the reply text without its `ERR ` code.
    pub fn load(&mut self, code: &[u8], replace: bool, timeout_ms: u64) -> Result<String, String> {
        let (name, _) = metadata(code)?;
        if !replace && self.libraries.contains_key(&name) {
            return Err(format!("Library '{name}' already exists"));
        }
        let lib = self.build(code, timeout_ms)?;
        for f in lib.functions.keys() {
            if let Some(owner) = self.owner_of(f) {
                if owner != name {
                    return Err(format!("Function {f} already exists"));
                }
            }
        }
        self.unlink(&name);
        self.link(lib);
        self.publish();
        Ok(name)
    }

    /// The library that has `function` (names compare without case, as Redis's
    /// functions dictionary).
    fn owner_of(&self, function: &str) -> Option<&str> {
        self.libraries
            .values()
            .find(|l| l.functions.keys().any(|k| k.eq_ignore_ascii_case(function)))
            .map(|l| l.name.as_str())
    }

    /// FCALL's lookup: one hash probe (names are keyed in lower case).
    pub fn find(&self, name: &[u8]) -> Option<&Rc<FunctionEntry>> {
        let name = std::str::from_utf8(name).ok()?;
        if name.bytes().any(|b| b.is_ascii_uppercase()) {
            self.functions.get(&name.to_ascii_lowercase())
        } else {
            self.functions.get(name)
        }
    }

    fn unlink(&mut self, name: &str) -> Option<Library> {
        let lib = self.libraries.remove(name)?;
        for f in lib.functions.keys() {
            self.functions.remove(&f.to_ascii_lowercase());
        }
        Some(lib)
    }

    fn link(&mut self, lib: Library) {
        for (n, f) in &lib.functions {
            self.functions.insert(n.to_ascii_lowercase(), f.clone());
        }
        self.libraries.insert(lib.name.clone(), lib);
    }

    /// INFO `used_memory_vm_functions`: the functions' Lua state.
    pub fn vm_bytes(&self) -> usize {
        self.state
            .as_ref()
            .map_or(self.lent_vm_bytes, |s| s.engine.used_memory())
    }

    /// INFO `used_memory_functions`: the libraries' code and per-library and
    /// per-function overheads (names, entries).
    pub fn overhead_bytes(&self) -> usize {
        self.libraries
            .values()
            .map(|l| {
                l.code.len()
                    + l.name.len()
                    + 64
                    + l.functions
                        .values()
                        .map(|f| 2 * f.name.len() + f.desc.as_ref().map_or(0, Vec::len) + 96)
                        .sum::<usize>()
            })
            .sum()
    }

    /// FUNCTION FLUSH: every library and the Lua state go.
    pub fn flush(&mut self) {
        self.functions.clear();
        self.libraries.clear();
        self.state = None;
        self.lent_vm_bytes = 0;
        self.publish();
    }

    /// The libraries as RDB function records (FUNCTION DUMP's body, RDB files, images).
    pub fn records(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for lib in self.libraries.values() {
            rdb_value::write_function_library(&mut out, &lib.code);
        }
        out
    }

    fn publish(&self) {
        let blob = Arc::new(self.records());
        *self.published.lock().unwrap_or_else(|p| p.into_inner()) = blob;
    }

    /// Adds libraries' codes (FUNCTION RESTORE, RDB load, image load) as Redis's
    /// libraryJoin: all or nothing. `replace`: a library of the same name is replaced
    /// (else the whole restore fails); a function name owned by another library always
    /// fails it. `timeout_ms` (0: none) limits each library's load.
    pub fn restore(
        &mut self,
        codes: &[Vec<u8>],
        flush: bool,
        replace: bool,
        timeout_ms: u64,
    ) -> Result<(), String> {
        let mut built: Vec<Library> = Vec::with_capacity(codes.len());
        for code in codes {
            let lib = self.build(code, timeout_ms)?;
            if built.iter().any(|l| l.name == lib.name) {
                return Err(format!("Library '{}' already exists", lib.name));
            }
            for f in lib.functions.keys() {
                let clash = |l: &Library| l.functions.keys().any(|k| k.eq_ignore_ascii_case(f));
                if built.iter().any(clash) {
                    return Err(format!("Function {f} already exists"));
                }
            }
            built.push(lib);
        }
        if !flush {
            for lib in &built {
                if self.libraries.contains_key(&lib.name) && !replace {
                    return Err(format!("Library {} already exists", lib.name));
                }
            }
            for lib in &built {
                for f in lib.functions.keys() {
                    if let Some(owner) = self.owner_of(f) {
                        let replaced = replace && built.iter().any(|l| l.name == owner);
                        if !replaced {
                            return Err(format!("Function {f} already exists"));
                        }
                    }
                }
            }
        } else {
            self.functions.clear();
            self.libraries.clear();
        }
        for lib in built {
            self.unlink(&lib.name);
            self.link(lib);
        }
        self.publish();
        Ok(())
    }
}

/// The functions' Lua state: the engine, the globals libraries see and the load-time API.
fn new_state() -> mlua::Result<FnState> {
    let engine = Engine::new()?;
    let lua = engine.lua.clone();
    let pending: Pending = Rc::default();
    let seen = pending.clone();
    let register = lua.create_function(move |_, args: MultiValue| {
        let mut slot = seen.borrow_mut();
        let Some(list) = slot.as_mut() else {
            return Err(lualib_reply(
                "ERR redis.register_function can only be called on FUNCTION LOAD command",
            ));
        };
        let entry = register_args(&args).map_err(|e| lualib_reply(&format!("ERR {e}")))?;
        if list.iter().any(|f| f.name == entry.name) {
            return Err(lualib_reply("ERR Function already exists in the library"));
        }
        list.push(entry);
        Ok(())
    })?;
    let (real, redis) = engine.globals();
    let setup: Function = lua
        .load(FUNCTIONS_SETUP_LUA)
        .set_name("=cairn_internal")
        .into_function()?;
    let (env, env_mt, load_api): (Table, Table, Table) =
        setup.call((real.clone(), redis.clone(), register))?;
    env_mt.raw_set("__index", real.clone())?;
    Ok(FnState {
        engine,
        env,
        env_mt,
        load_api,
        pending,
    })
}

fn lualib_reply(text: &str) -> mlua::Error {
    super::lualib::raise_reply(text.to_string())
}

/// `redis.register_function`'s arguments (Redis's luaRegisterFunctionReadArgs): `(name,
/// callback)` or one table of named arguments. Err: the text after `ERR `.
fn register_args(args: &MultiValue) -> Result<FunctionEntry, String> {
    let as_string = |v: &Value| -> Option<String> {
        match v {
            Value::String(s) => Some(s.to_string_lossy()),
            Value::Integer(i) => Some(i.to_string()),
            Value::Number(n) => Some(super::lualib::fmt_g(*n, 14)),
            _ => None,
        }
    };
    let (name, func, flags, desc) = match args.len() {
        1 => {
            let Some(Value::Table(t)) = args.front() else {
                return Err("calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).".into());
            };
            let (mut name, mut func, mut flags, mut desc) = (None, None, 0u32, None);
            for pair in t.clone().pairs::<Value, Value>() {
                let (k, v) = pair.map_err(|e| e.to_string())?;
                let Some(key) = as_string(&k) else {
                    return Err(
                        "named argument key given to redis.register_function is not a string"
                            .into(),
                    );
                };
                match key.to_ascii_lowercase().as_str() {
                    "function_name" => {
                        name = Some(as_string(&v).ok_or(
                            "function_name argument given to redis.register_function must be a string",
                        )?);
                    }
                    "description" => {
                        desc = Some(as_string(&v).ok_or(
                            "description argument given to redis.register_function must be a string",
                        )?);
                    }
                    "callback" => {
                        let Value::Function(f) = v else {
                            return Err("callback argument given to redis.register_function must be a function".into());
                        };
                        func = Some(f);
                    }
                    "flags" => {
                        let Value::Table(ft) = v else {
                            return Err("flags argument to redis.register_function must be a table representing function flags".into());
                        };
                        flags = read_flags(&ft, &as_string).ok_or("unknown flag given")?;
                    }
                    _ => return Err("unknown argument given to redis.register_function".into()),
                }
            }
            let Some(name) = name else {
                return Err("redis.register_function must get a function name argument".into());
            };
            let Some(func) = func else {
                return Err("redis.register_function must get a callback argument".into());
            };
            (name, func, flags, desc)
        }
        2 => {
            let Some(name) = args.front().and_then(as_string) else {
                return Err("first argument to redis.register_function must be a string".into());
            };
            let Some(Value::Function(f)) = args.get(1) else {
                return Err("second argument to redis.register_function must be a function".into());
            };
            (name, f.clone(), 0, None)
        }
        _ => return Err("wrong number of arguments to redis.register_function".into()),
    };
    if !valid_name(name.as_bytes()) {
        // Redis 7.0 answers a bad function name with the library names' text.
        return Err(BAD_NAME.into());
    }
    Ok(FunctionEntry {
        name,
        func,
        flags,
        desc: desc.map(String::into_bytes),
    })
}

/// A flags table: its array part, each a flag name (any case). None: a value that is not
/// a flag.
fn read_flags(t: &Table, as_string: &dyn Fn(&Value) -> Option<String>) -> Option<u32> {
    let mut flags = 0;
    let mut i = 1i64;
    loop {
        let v: Value = t.raw_get(i).ok()?;
        if v == Value::Nil {
            return Some(flags);
        }
        let s = as_string(&v)?;
        let bit = engine::flag_bit(&s)?;
        flags |= bit;
        i += 1;
    }
}

/// The load-time API and the libraries' globals. Arguments: the real globals, the real
/// `redis` table, `register_function`.
const FUNCTIONS_SETUP_LUA: &str = r#"
local real, redis, register = ...
local error, tostring, setmetatable = error, tostring, setmetatable
local function readonly() error('Attempt to modify a readonly table', 2) end
local function missing(_, k)
  error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
end
-- A read-only view of `t`; reading a key `t` lacks is an error.
local function view(t)
  setmetatable(t, {__index = missing, __metatable = false, __cairn_ro = true})
  return setmetatable({}, {__index = t, __newindex = readonly, __metatable = false, __cairn_ro = true})
end
local lr = {register_function = register, log = redis.log}
for _, k in ipairs({'LOG_DEBUG', 'LOG_VERBOSE', 'LOG_NOTICE', 'LOG_WARNING', 'REDIS_VERSION', 'REDIS_VERSION_NUM'}) do
  lr[k] = redis[k]
end
local load_api = {redis = view(lr)}
setmetatable(load_api, {__index = missing, __newindex = readonly, __metatable = false, __cairn_ro = true})
local env_mt = {__index = real, __newindex = readonly, __metatable = false, __cairn_ro = true}
local env = setmetatable({}, env_mt)
return env, env_mt, load_api
"#;

/// Lets the server install libraries read from a file (RDB, image) at startup.
pub fn install(fs: &mut Functions, codes: &[Vec<u8>]) -> Result<(), String> {
    fs.restore(codes, true, false, 0)
}

fn fcall(ctx: &mut Ctx) -> CmdResult {
    fcall_generic(ctx, false)
}
fn fcall_ro(ctx: &mut Ctx) -> CmdResult {
    fcall_generic(ctx, true)
}

fn fcall_generic(ctx: &mut Ctx, ro: bool) -> CmdResult {
    let args = ctx.args;
    let name = args.get(1);
    let found = ctx.srv.scripts.functions.find(name).cloned();
    let Some(entry) = found else {
        return Err(CmdError::err("Function not found"));
    };
    let Some(numkeys) = crate::util::parse_i64(args.get(2)) else {
        return Err(CmdError::err("Bad number of keys provided"));
    };
    if numkeys > args.len() as i64 - 3 {
        return Err(CmdError::err(
            "Number of keys can't be greater than number of args",
        ));
    }
    if numkeys < 0 {
        return Err(CmdError::err("Number of keys can't be negative"));
    }
    super::run_script(ctx, super::Target::Function(entry), ro, numkeys as usize)
}

fn function_load(ctx: &mut Ctx) -> CmdResult {
    let args = ctx.args;
    let mut replace = false;
    let mut i = 2;
    while i < args.len() - 1 {
        if args.is(i, "replace") {
            replace = true;
            i += 1;
            continue;
        }
        return Err(CmdError::err(format!(
            "Unknown option given: {}",
            String::from_utf8_lossy(args.get(i))
        )));
    }
    let code = args.get(args.len() - 1);
    // A library loaded from the log or a replication stream runs without the time limit.
    let timeout = if ctx.srv.loading { 0 } else { LOAD_TIMEOUT_MS };
    let name = ctx
        .srv
        .scripts
        .functions
        .load(code, replace, timeout)
        .map_err(CmdError::err)?;
    ctx.dirty(1);
    ctx.out.bulk(name.as_bytes());
    Ok(())
}

fn function_delete(ctx: &mut Ctx) -> CmdResult {
    let name = String::from_utf8_lossy(ctx.args.get(2)).into_owned();
    let fs = &mut ctx.srv.scripts.functions;
    if fs.unlink(&name).is_none() {
        return Err(CmdError::err("Library not found"));
    }
    fs.publish();
    ctx.dirty(1);
    ctx.out.ok();
    Ok(())
}

fn sub_syntax(ctx: &Ctx) -> CmdError {
    CmdError::err(format!(
        "unknown subcommand or wrong number of arguments for '{}'. Try FUNCTION HELP.",
        String::from_utf8_lossy(ctx.args.get(1))
    ))
}

fn function_flush(ctx: &mut Ctx) -> CmdResult {
    if ctx.args.len() > 3 {
        return Err(sub_syntax(ctx));
    }
    if ctx.args.len() == 3 && !ctx.args.is(2, "sync") && !ctx.args.is(2, "async") {
        return Err(CmdError::err(
            "FUNCTION FLUSH only supports SYNC|ASYNC option",
        ));
    }
    // ASYNC frees here too: the Lua state cannot leave this thread, and freeing it is
    // proportional to the libraries' code, not to the dataset.
    ctx.srv.scripts.functions.flush();
    ctx.dirty(1);
    ctx.out.ok();
    Ok(())
}

fn function_dump(ctx: &mut Ctx) -> CmdResult {
    let payload = rdb_value::dump_payload(ctx.srv.scripts.functions.records());
    ctx.out.bulk(&payload);
    Ok(())
}

fn function_restore(ctx: &mut Ctx) -> CmdResult {
    if ctx.args.len() > 4 {
        return Err(sub_syntax(ctx));
    }
    let (mut flush, mut replace) = (false, false);
    if ctx.args.len() == 4 {
        if ctx.args.is(3, "flush") {
            flush = true;
        } else if ctx.args.is(3, "replace") {
            replace = true;
        } else if !ctx.args.is(3, "append") {
            return Err(CmdError::err(
                "Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.",
            ));
        }
    }
    let payload = ctx.args.get(2);
    if rdb_value::verify_dump_payload(payload).is_none() {
        return Err(CmdError::err("DUMP payload version or checksum are wrong"));
    }
    let codes = rdb_value::read_function_payload(payload).map_err(CmdError::err)?;
    // Redis restores without a time limit; a client's payload gets FUNCTION LOAD's, so
    // code that never returns cannot hold the executor (replaying the log: none).
    let timeout = if ctx.srv.loading { 0 } else { LOAD_TIMEOUT_MS };
    ctx.srv
        .scripts
        .functions
        .restore(&codes, flush, replace, timeout)
        .map_err(CmdError::err)?;
    ctx.dirty(1);
    ctx.out.ok();
    Ok(())
}

fn function_list(ctx: &mut Ctx) -> CmdResult {
    let args = ctx.args;
    let mut with_code = false;
    let mut pattern: Option<&[u8]> = None;
    let mut i = 2;
    while i < args.len() {
        if !with_code && args.is(i, "withcode") {
            with_code = true;
            i += 1;
            continue;
        }
        if pattern.is_none() && args.is(i, "libraryname") {
            if i + 1 >= args.len() {
                return Err(CmdError::err("library name argument was not given"));
            }
            pattern = Some(args.get(i + 1));
            i += 2;
            continue;
        }
        return Err(CmdError::err(format!(
            "Unknown argument {}",
            String::from_utf8_lossy(args.get(i))
        )));
    }
    let fs = &ctx.srv.scripts.functions;
    let libs: Vec<&Library> = fs
        .libraries
        .values()
        .filter(|l| pattern.is_none_or(|p| crate::util::glob_match(p, l.name.as_bytes(), true)))
        .collect();
    let out = &mut ctx.out;
    out.array(libs.len());
    for lib in libs {
        out.map(if with_code { 4 } else { 3 });
        out.bulk(b"library_name");
        out.bulk(lib.name.as_bytes());
        out.bulk(b"engine");
        out.bulk(b"LUA");
        out.bulk(b"functions");
        out.array(lib.functions.len());
        for f in lib.functions.values() {
            out.map(3);
            out.bulk(b"name");
            out.bulk(f.name.as_bytes());
            out.bulk(b"description");
            match &f.desc {
                Some(d) => out.bulk(d),
                None => out.null(),
            }
            out.bulk(b"flags");
            let names = engine::flag_names(f.flags);
            out.set(names.len());
            for n in names {
                out.simple(n);
            }
        }
        if with_code {
            out.bulk(b"library_code");
            out.bulk(&lib.code);
        }
    }
    Ok(())
}

/// FUNCTION STATS as the executor sees it: between commands, so no function runs.
fn function_stats(ctx: &mut Ctx) -> CmdResult {
    // Served while a script is busy: an EVAL's caller gets BUSY, a function is described.
    let busy = &ctx.srv.scripts.busy;
    if busy.in_busy() && ctx.srv.scripts.running.is_none() {
        return Err(CmdError::raw(busy.busy_error()));
    }
    let fs = &ctx.srv.scripts.functions;
    let (libs, funcs) = (fs.libraries.len(), fs.functions.len());
    let out = &mut ctx.out;
    out.map(2);
    out.bulk(b"running_script");
    match ctx.srv.scripts.running.as_ref().filter(|_| busy.in_busy()) {
        Some(r) => {
            out.map(3);
            out.bulk(b"name");
            out.bulk(r.name.as_bytes());
            out.bulk(b"command");
            out.array(r.argv.len());
            for a in &r.argv {
                out.bulk(a);
            }
            out.bulk(b"duration_ms");
            out.int(r.start.elapsed().as_millis() as i64);
        }
        None => out.null(),
    }
    out.bulk(b"engines");
    out.map(1);
    out.bulk(b"LUA");
    out.map(2);
    out.bulk(b"libraries_count");
    out.int(libs as i64);
    out.bulk(b"functions_count");
    out.int(funcs as i64);
    Ok(())
}

/// FUNCTION KILL (see SCRIPT KILL).
fn function_kill(ctx: &mut Ctx) -> CmdResult {
    super::kill_running(ctx, true)
}

fn function_help(ctx: &mut Ctx) -> CmdResult {
    const LINES: &[&str] = &[
        "FUNCTION <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "LOAD [REPLACE] <FUNCTION CODE>",
        "    Create a new library with the given library name and code.",
        "DELETE <LIBRARY NAME>",
        "    Delete the given library.",
        "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
        "    Return general information on all the libraries:",
        "    * Library name",
        "    * The engine used to run the Library",
        "    * Library description",
        "    * Functions list",
        "    * Library code (if WITHCODE is given)",
        "    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
        "STATS",
        "    Return information about the current function running:",
        "    * Function name",
        "    * Command used to run the function",
        "    * Duration in MS that the function is running",
        "    If no function is running, return nil",
        "    In addition, returns a list of available engines.",
        "KILL",
        "    Kill the current running function.",
        "FLUSH [ASYNC|SYNC]",
        "    Delete all the libraries.",
        "    When called without the optional mode argument, the behavior is determined by the",
        "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
        "    * ASYNC: Asynchronously flush the libraries.",
        "    * SYNC: Synchronously flush the libraries.",
        "DUMP",
        "    Return a serialized payload representing the current libraries, can be restored using FUNCTION RESTORE command",
        "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
        "    Restore the libraries represented by the given payload, it is possible to give a restore policy to",
        "    control how to handle existing libraries (default APPEND):",
        "    * FLUSH: delete all existing libraries.",
        "    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.",
        "    * REPLACE: appends the restored libraries to the existing libraries, On collision, replace the old",
        "      libraries with the new libraries (notice that even on this option there is a chance of failure",
        "      in case of functions name collision with another library).",
        "HELP",
        "    Prints this help.",
    ];
    ctx.out.array(LINES.len());
    for l in LINES {
        ctx.out.simple(l);
    }
    Ok(())
}
