//! `redis.call` and `redis.pcall` as C functions on Lua's own API.
//!
//! Why not an mlua function: a script's run is mostly these calls, and mlua's callback
//! path converted every argument into a `MultiValue` and made every reply string and
//! table in a protected call of its own: about 0.4 µs per call more than Redis (the
//! EVALSHA benchmark's ten-command script). Here the arguments are read off the Lua stack
//! straight into reused buffers and the reply is pushed with Lua's C API.
//!
//! Lua errors are `longjmp`s, which must never cross a Rust frame that owns something to
//! drop. So a call has two steps:
//! 1. [`run_step`] reads the arguments and runs the command through the host. Lua
//!    allocates nothing here (`lua_tolstring` of a string and `lua_tonumber` do not), so no
//!    Lua error can be raised while its frames hold buffers and borrows.
//! 2. [`push_reply`] / [`push_error_table`] build the Lua values. An allocation there may
//!    raise Lua's memory error, so these frames hold only plain references and integers.
//!
//! A panic in step 1 (a bug in a command) cannot unwind through Lua's C frames: it is
//! caught, the call raises an error, and the run resumes the panic once Lua has returned
//! (`CallSite::take_panic`).

use super::engine::RunHost;
use crate::commands::Args;
use mlua::ffi;
use std::any::Any;
use std::cell::{Cell, RefCell};
use std::ffi::c_int;

/// Buffers bigger than this are not kept for the next call.
const CALL_BUF_KEEP_BYTES: usize = 64 << 10;

/// Replies nested deeper than this are refused instead of growing the Lua stack further
/// (commands' replies nest a few levels).
const MAX_REPLY_NESTING: usize = 1000;

/// What `redis.call` and `redis.pcall` reach through their first upvalue: one per Lua
/// state, owned by its engine (which outlives every run).
#[derive(Default)]
pub struct CallSite {
    /// The running script's host (None between runs).
    pub host: Cell<Option<RunHost>>,
    bufs: RefCell<CallBufs>,
    /// A reply is being pushed from `bufs` (read through a raw pointer): a call made
    /// meanwhile is refused instead of overwriting them.
    pushing: Cell<bool>,
    /// A panic caught in a call, resumed when the run has left Lua.
    panic: Cell<Option<Box<dyn Any + Send>>>,
}

/// A call's argument bytes and their ranges, the command's reply, an error's text.
#[derive(Default)]
struct CallBufs {
    data: Vec<u8>,
    ranges: Vec<(usize, usize)>,
    out: Vec<u8>,
    err: Vec<u8>,
}

impl CallSite {
    /// Before a run: a call cut short by a Lua error (out of memory while pushing its
    /// reply) must not refuse the next run's calls.
    pub fn start_run(&self, host: RunHost) {
        self.pushing.set(false);
        self.host.set(Some(host));
    }

    pub fn end_run(&self) {
        self.host.set(None);
    }

    /// The panic a call caught during the run, if any.
    pub fn take_panic(&self) -> Option<Box<dyn Any + Send>> {
        self.panic.take()
    }
}

/// How step 1 ended.
enum Step {
    /// The command's reply is in `bufs.out`.
    Reply,
    /// The error text is in `bufs.err`: raised by `redis.call`, returned as `{err=...}` by
    /// `redis.pcall`.
    Error,
    /// An error with a fixed text; `always_raise`: raised by `redis.pcall` too.
    Refused {
        text: &'static str,
        always_raise: bool,
    },
}

/// Creates `redis.call` (`raise`) or `redis.pcall` as a C closure over `site`.
///
/// # Safety
/// `site` must stay at its address for the life of the Lua state (the engine keeps it
/// in an `Rc` it owns).
pub unsafe fn create(
    lua: &mlua::Lua,
    site: *const CallSite,
    raise: bool,
) -> mlua::Result<mlua::Function> {
    lua.exec_raw((), |state| {
        ffi::lua_pushlightuserdata(state, site as *mut std::ffi::c_void);
        ffi::lua_pushboolean(state, raise as c_int);
        ffi::lua_pushcclosure(state, lua_redis_call, 2);
    })
}

unsafe extern "C-unwind" fn lua_redis_call(state: *mut ffi::lua_State) -> c_int {
    let site = &*(ffi::lua_touserdata(state, ffi::lua_upvalueindex(1)) as *const CallSite);
    let raise = ffi::lua_toboolean(state, ffi::lua_upvalueindex(2)) != 0;
    let step =
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_step(state, site))) {
            Ok(step) => step,
            Err(payload) => {
                site.panic.set(Some(payload));
                Step::Refused {
                    text: "ERR internal error in redis.call",
                    always_raise: true,
                }
            }
        };
    // From here on only plain references: a Lua error may jump out of any push.
    let base = ffi::lua_gettop(state);
    let must_raise = match step {
        Step::Reply => {
            site.pushing.set(true);
            // SAFETY: `pushing` refuses any call that would touch the buffers while the
            // reply is read from them.
            let out: &[u8] = &(*site.bufs.as_ptr()).out;
            let pushed = push_reply(state, out, 0, 0);
            site.pushing.set(false);
            if pushed.is_ok() {
                return 1;
            }
            ffi::lua_settop(state, base);
            push_error_table(state, b"ERR unreadable reply from the command");
            raise
        }
        Step::Error => {
            site.pushing.set(true);
            let err: &[u8] = &(*site.bufs.as_ptr()).err;
            push_error_table(state, err);
            site.pushing.set(false);
            raise
        }
        Step::Refused { text, always_raise } => {
            push_error_table(state, text.as_bytes());
            raise || always_raise
        }
    };
    if must_raise {
        ffi::lua_error(state);
    }
    1
}

/// Step 1: the arguments into the buffers, the command run by the host.
unsafe fn run_step(state: *mut ffi::lua_State, site: &CallSite) -> Step {
    let Some(host) = site.host.get() else {
        return Step::Refused {
            text: "ERR redis.call is available only while a script runs",
            always_raise: true,
        };
    };
    const NESTED: Step = Step::Refused {
        text: "ERR This Redis command is not allowed from script",
        always_raise: false,
    };
    if site.pushing.get() {
        return NESTED;
    }
    let Ok(mut bufs) = site.bufs.try_borrow_mut() else {
        return NESTED;
    };
    let bufs = &mut *bufs;
    for buf in [&mut bufs.data, &mut bufs.out, &mut bufs.err] {
        if buf.capacity() > CALL_BUF_KEEP_BYTES {
            *buf = Vec::new();
        }
        buf.clear();
    }
    bufs.ranges.clear();
    let argc = ffi::lua_gettop(state);
    if argc == 0 {
        bufs.err
            .extend_from_slice(b"ERR Please specify at least one argument for this redis lib call");
        return Step::Error;
    }
    for i in 1..=argc {
        let start = bufs.data.len();
        match ffi::lua_type(state, i) {
            ffi::LUA_TSTRING => {
                let mut len = 0usize;
                let p = ffi::lua_tolstring(state, i, &mut len);
                bufs.data
                    .extend_from_slice(std::slice::from_raw_parts(p.cast::<u8>(), len));
            }
            ffi::LUA_TNUMBER => push_number_arg(ffi::lua_tonumber(state, i), &mut bufs.data),
            _ => {
                bufs.err.extend_from_slice(
                    b"ERR Lua redis lib command arguments must be strings or integers",
                );
                return Step::Error;
            }
        }
        bufs.ranges.push((start, bufs.data.len() - start));
    }
    let args = Args::new(&bufs.data, &bufs.ranges);
    match (host.call)(host.ctx, args, &mut bufs.out) {
        Ok(()) if bufs.out.first() == Some(&b'-') => {
            let end = bufs
                .out
                .windows(2)
                .position(|w| w == b"\r\n")
                .unwrap_or(bufs.out.len());
            bufs.err.extend_from_slice(&bufs.out[1..end]);
            Step::Error
        }
        Ok(()) => Step::Reply,
        Err(text) => {
            bufs.err.extend_from_slice(text.as_bytes());
            Step::Error
        }
    }
}

/// A number argument as the script's value reads: integral values in i64's range as
/// integers, the others as `%.17g` (what mlua's conversion gave before).
fn push_number_arg(n: f64, out: &mut Vec<u8>) {
    use std::io::Write;
    const LIMIT: f64 = 9_223_372_036_854_775_808.0;
    if (-LIMIT..LIMIT).contains(&n) && ((n as i64) as f64).to_bits() == n.to_bits() {
        let _ = write!(out, "{}", n as i64);
    } else {
        out.extend_from_slice(super::lualib::fmt_g(n, 17).as_bytes());
    }
}

/// `{err = text}` on the stack.
unsafe fn push_error_table(state: *mut ffi::lua_State, text: &[u8]) {
    ffi::lua_createtable(state, 0, 1);
    ffi::lua_pushlstring(state, c"err".as_ptr(), 3);
    ffi::lua_pushlstring(state, text.as_ptr().cast(), text.len());
    ffi::lua_rawset(state, -3);
}

/// The line at `buf[pos..]` (without its CRLF) and where the next one starts.
fn line(buf: &[u8], pos: usize) -> Result<(&[u8], usize), ()> {
    let rest = buf.get(pos..).ok_or(())?;
    let end = rest.windows(2).position(|w| w == b"\r\n").ok_or(())?;
    Ok((&rest[..end], pos + end + 2))
}

fn int_of(b: &[u8]) -> Result<i64, ()> {
    crate::util::parse_i64(b).ok_or(())
}

/// Sets `t[name] = <top of stack>` on the table just below the top, popping the value.
unsafe fn set_field(state: *mut ffi::lua_State, name: &[u8]) {
    ffi::lua_pushlstring(state, name.as_ptr().cast(), name.len());
    ffi::lua_insert(state, -2);
    ffi::lua_rawset(state, -3);
}

/// Wraps the value on top of the stack as `{field = value}`.
unsafe fn tag(state: *mut ffi::lua_State, field: &[u8]) {
    ffi::lua_createtable(state, 0, 1);
    ffi::lua_insert(state, -2);
    set_field(state, field);
}

/// Pushes the reply at `buf[pos..]` as one Lua value (the conversions of `convert.rs`'s
/// module comment) and returns where it ends. Err: an unreadable reply or one nested
/// past [`MAX_REPLY_NESTING`] (never from the server's own encoder); the stack may then
/// hold partial values (the caller resets it).
unsafe fn push_reply(
    state: *mut ffi::lua_State,
    buf: &[u8],
    pos: usize,
    nesting: usize,
) -> Result<usize, ()> {
    if nesting > MAX_REPLY_NESTING || ffi::lua_checkstack(state, 4) == 0 {
        return Err(());
    }
    let kind = *buf.get(pos).ok_or(())?;
    let (head, mut next) = line(buf, pos + 1)?;
    let push_bytes = |b: &[u8]| ffi::lua_pushlstring(state, b.as_ptr().cast(), b.len());
    match kind {
        b':' => ffi::lua_pushnumber(state, int_of(head)? as ffi::lua_Number),
        b'+' => {
            push_bytes(head);
            tag(state, b"ok");
        }
        b'-' => {
            push_bytes(head);
            tag(state, b"err");
        }
        b'$' | b'=' => {
            let n = int_of(head)?;
            if n < 0 {
                ffi::lua_pushboolean(state, 0);
                return Ok(next);
            }
            let n = n as usize;
            let data = buf.get(next..next.checked_add(n).ok_or(())?).ok_or(())?;
            next += n + 2;
            if kind == b'=' {
                let (format, text) = if data.len() >= 4 && data[3] == b':' {
                    (&data[..3], &data[4..])
                } else {
                    (&b"txt"[..], data)
                };
                ffi::lua_createtable(state, 0, 2);
                push_bytes(format);
                set_field(state, b"format");
                push_bytes(text);
                set_field(state, b"string");
                tag(state, b"verbatim_string");
            } else {
                push_bytes(data);
            }
        }
        b'(' => {
            push_bytes(head);
            tag(state, b"big_number");
        }
        b'_' => ffi::lua_pushnil(state),
        b'#' => ffi::lua_pushboolean(state, (head == b"t") as c_int),
        b',' => {
            let s = std::str::from_utf8(head).map_err(|_| ())?;
            let d = match s {
                "inf" => f64::INFINITY,
                "-inf" => f64::NEG_INFINITY,
                "nan" | "-nan" => f64::NAN,
                _ => s.parse::<f64>().map_err(|_| ())?,
            };
            ffi::lua_pushnumber(state, d);
            tag(state, b"double");
        }
        b'*' | b'~' | b'>' => {
            let n = int_of(head)?;
            if n < 0 {
                ffi::lua_pushboolean(state, 0);
                return Ok(next);
            }
            // A declared count is not an allocation: the table grows as elements come.
            let hint = n.min(1024) as c_int;
            if kind == b'~' {
                ffi::lua_createtable(state, 0, hint);
            } else {
                ffi::lua_createtable(state, hint, 0);
            }
            for i in 0..n {
                next = push_reply(state, buf, next, nesting + 1)?;
                if kind == b'~' {
                    if ffi::lua_isnil(state, -1) != 0 {
                        return Err(());
                    }
                    ffi::lua_pushboolean(state, 1);
                    ffi::lua_rawset(state, -3);
                } else {
                    ffi::lua_rawseti(state, -2, (i + 1) as ffi::lua_Integer);
                }
            }
            if kind == b'~' {
                tag(state, b"set");
            }
        }
        b'%' | b'|' => {
            let n = int_of(head)?;
            ffi::lua_createtable(state, 0, n.clamp(0, 1024) as c_int);
            for _ in 0..n.max(0) {
                next = push_reply(state, buf, next, nesting + 1)?;
                next = push_reply(state, buf, next, nesting + 1)?;
                if ffi::lua_isnil(state, -2) != 0 {
                    ffi::lua_settop(state, -3);
                } else {
                    ffi::lua_rawset(state, -3);
                }
            }
            if kind == b'|' {
                // An attribute only annotates the reply that follows it.
                ffi::lua_settop(state, -2);
                return push_reply(state, buf, next, nesting);
            }
            tag(state, b"map");
        }
        _ => return Err(()),
    }
    Ok(next)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mlua::{Lua, Table, Value};
    use std::ffi::c_void;
    use std::rc::Rc;

    /// A host that answers every call with `reply` and keeps the last call's arguments.
    #[derive(Default)]
    struct Fake {
        reply: RefCell<Vec<u8>>,
        seen: RefCell<Vec<Vec<u8>>>,
    }

    fn fake_call(ctx: *const c_void, args: Args, out: &mut Vec<u8>) -> Result<(), String> {
        // SAFETY: `ctx` is the test's `Fake`, alive for the run.
        let fake = unsafe { &*ctx.cast::<Fake>() };
        *fake.seen.borrow_mut() = (0..args.len()).map(|i| args.get(i).to_vec()).collect();
        if args.get(0) == b"refuse" {
            return Err("ERR refused here".into());
        }
        out.extend_from_slice(&fake.reply.borrow());
        Ok(())
    }

    struct Rig {
        lua: Lua,
        site: Rc<CallSite>,
        fake: Box<Fake>,
    }

    impl Rig {
        fn new() -> Rig {
            let lua = Lua::new();
            let site: Rc<CallSite> = Rc::default();
            let redis = lua.create_table().unwrap();
            for (name, raise) in [("call", true), ("pcall", false)] {
                // SAFETY: the rig keeps `site` as long as `lua`.
                let f = unsafe { create(&lua, Rc::as_ptr(&site), raise).unwrap() };
                redis.raw_set(name, f).unwrap();
            }
            lua.globals().raw_set("redis", redis).unwrap();
            let fake = Box::<Fake>::default();
            site.start_run(RunHost {
                ctx: (&*fake as *const Fake).cast(),
                call: fake_call,
                serve: |_| {},
            });
            Rig { lua, site, fake }
        }

        /// Runs `code` with the host answering `reply`.
        fn run(&self, reply: &[u8], code: &str) -> mlua::Result<Value> {
            *self.fake.reply.borrow_mut() = reply.to_vec();
            self.lua.load(code).eval()
        }

        fn conv(&self, reply: &[u8]) -> Value {
            self.run(reply, "return redis.call('x')").unwrap()
        }
    }

    #[test]
    fn replies_become_lua_values() {
        let rig = Rig::new();
        assert!(matches!(rig.conv(b":5\r\n"), Value::Integer(5)));
        assert!(matches!(rig.conv(b"$-1\r\n"), Value::Boolean(false)));
        assert!(matches!(rig.conv(b"*-1\r\n"), Value::Boolean(false)));
        assert!(matches!(rig.conv(b"_\r\n"), Value::Nil));
        assert!(matches!(rig.conv(b"#t\r\n"), Value::Boolean(true)));
        let Value::Table(t) = rig.conv(b"+OK\r\n") else {
            panic!()
        };
        assert_eq!(t.raw_get::<String>("ok").unwrap(), "OK");
        let Value::Table(t) = rig.conv(b"*3\r\n$1\r\na\r\n$-1\r\n:2\r\n") else {
            panic!()
        };
        assert_eq!(t.raw_len(), 3);
        assert!(matches!(
            t.raw_get::<Value>(2).unwrap(),
            Value::Boolean(false)
        ));
        let Value::Table(t) = rig.conv(b"*2\r\n-ERR inner\r\n*1\r\n:7\r\n") else {
            panic!()
        };
        let e: Table = t.raw_get(1).unwrap();
        assert_eq!(e.raw_get::<String>("err").unwrap(), "ERR inner");
        let inner: Table = t.raw_get(2).unwrap();
        assert_eq!(inner.raw_get::<i64>(1).unwrap(), 7);
        let Value::Table(t) = rig.conv(b"%2\r\n$1\r\nk\r\n:1\r\n_\r\n:2\r\n") else {
            panic!()
        };
        let m: Table = t.raw_get("map").unwrap();
        assert_eq!(m.raw_get::<i64>("k").unwrap(), 1);
        assert_eq!(m.pairs::<Value, Value>().count(), 1);
        let Value::Table(t) = rig.conv(b"~1\r\n$1\r\nk\r\n") else {
            panic!()
        };
        let s: Table = t.raw_get("set").unwrap();
        assert!(s.raw_get::<bool>("k").unwrap());
        let Value::Table(t) = rig.conv(b",1.5\r\n") else {
            panic!()
        };
        assert_eq!(t.raw_get::<f64>("double").unwrap(), 1.5);
        let Value::Table(t) = rig.conv(b"(123\r\n") else {
            panic!()
        };
        assert_eq!(t.raw_get::<String>("big_number").unwrap(), "123");
        let Value::Table(t) = rig.conv(b"=6\r\ntxt:hi\r\n") else {
            panic!()
        };
        let vt: Table = t.raw_get("verbatim_string").unwrap();
        assert_eq!(vt.raw_get::<String>("string").unwrap(), "hi");
        assert_eq!(vt.raw_get::<String>("format").unwrap(), "txt");
        // An attribute is skipped: the reply after it is the value.
        assert!(matches!(
            rig.conv(b"|1\r\n$1\r\na\r\n:1\r\n:9\r\n"),
            Value::Integer(9)
        ));
    }

    #[test]
    fn errors_raise_from_call_and_return_from_pcall() {
        let rig = Rig::new();
        // The `err` of what `f` raised.
        let raised = |reply: &[u8], f: &str| -> String {
            let code = format!("local ok, e = pcall({f}) assert(not ok) return e.err");
            rig.run(reply, &code).unwrap().to_string().unwrap()
        };
        // redis.call raises the error table; pcall of it hands back the table.
        let caught = rig
            .run(
                b"-ERR bad thing\r\n",
                "local ok, e = pcall(redis.call, 'x') return e.err",
            )
            .unwrap();
        assert_eq!(caught.to_string().unwrap(), "ERR bad thing");
        let returned = rig
            .run(b"-ERR bad thing\r\n", "return redis.pcall('x').err")
            .unwrap();
        assert_eq!(returned.to_string().unwrap(), "ERR bad thing");
        let refused = rig.run(b"", "return redis.pcall('refuse').err").unwrap();
        assert_eq!(refused.to_string().unwrap(), "ERR refused here");
        let no_args = rig.run(b"", "return redis.pcall().err").unwrap();
        assert_eq!(
            no_args.to_string().unwrap(),
            "ERR Please specify at least one argument for this redis lib call"
        );
        let bad_arg = rig.run(b"", "return redis.pcall('x', {}).err").unwrap();
        assert_eq!(
            bad_arg.to_string().unwrap(),
            "ERR Lua redis lib command arguments must be strings or integers"
        );
        assert_eq!(
            raised(b"", "redis.call, 'x', true"),
            "ERR Lua redis lib command arguments must be strings or integers"
        );
        // An unreadable reply is an error, not a crash or a partial value.
        let broken = rig.run(b"$5\r\nab", "return redis.pcall('x').err").unwrap();
        assert_eq!(
            broken.to_string().unwrap(),
            "ERR unreadable reply from the command"
        );
        let nested = format!("{}:1\r\n", "*1\r\n".repeat(MAX_REPLY_NESTING + 5));
        let deep = rig
            .run(nested.as_bytes(), "return redis.pcall('x').err")
            .unwrap();
        assert_eq!(
            deep.to_string().unwrap(),
            "ERR unreadable reply from the command"
        );
        // Between runs there is no host: even pcall raises.
        rig.site.end_run();
        assert_eq!(
            raised(b":1\r\n", "redis.pcall, 'x'"),
            "ERR redis.call is available only while a script runs"
        );
    }

    #[test]
    fn arguments_reach_the_host_as_the_script_wrote_them() {
        let rig = Rig::new();
        rig.run(
            b"+OK\r\n",
            "return redis.call('set', 'k', 3, 1.5, 0.1, -0, 'a\\0b')",
        )
        .unwrap();
        let seen = rig.fake.seen.borrow().clone();
        let want: Vec<&[u8]> = vec![
            b"set",
            b"k",
            b"3",
            b"1.5",
            b"0.10000000000000001",
            b"-0",
            b"a\0b",
        ];
        assert_eq!(seen, want);
    }

    #[test]
    fn number_arguments_read_as_the_script_wrote_them() {
        let fmt = |n: f64| {
            let mut out = Vec::new();
            push_number_arg(n, &mut out);
            String::from_utf8(out).unwrap()
        };
        assert_eq!(fmt(0.0), "0");
        assert_eq!(fmt(-12.0), "-12");
        assert_eq!(fmt(i64::MIN as f64), "-9223372036854775808");
        assert_eq!(fmt(9_223_372_036_854_775_808.0), "9.2233720368547758e+18");
        assert_eq!(fmt(1.5), "1.5");
        assert_eq!(fmt(-0.0), "-0");
        assert_eq!(fmt(f64::NAN), super::super::lualib::fmt_g(f64::NAN, 17));
    }
}
