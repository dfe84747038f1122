//! Shared helpers for black-box tests: start a real `cairn-server` (or Debian's
//! `redis-server` for differential tests) on a free loopback port, talk to it with the
//! `redis` crate or raw RESP bytes.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A server process that is killed when dropped.
pub struct ServerProc {
    pub child: Child,
    pub port: u16,
    pub dir: PathBuf,
}

impl Drop for ServerProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
        // A failing test shows what each of its servers logged (the test harness prints
        // a failed test's captured output): races seen only on a loaded CI machine can
        // then be read from its output.
        let log = server_log_path(&self.dir);
        if std::thread::panicking() {
            if let Ok(text) = std::fs::read_to_string(&log) {
                let lines: Vec<&str> = text.lines().collect();
                let from = lines.len().saturating_sub(SERVER_LOG_LINES_SHOWN);
                println!(
                    "---- log of the server on port {} (last {} lines)",
                    self.port,
                    lines.len() - from
                );
                for line in &lines[from..] {
                    println!("{line}");
                }
            }
        }
        let _ = std::fs::remove_file(&log);
    }
}

impl ServerProc {
    /// What the server logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(server_log_path(&self.dir)).unwrap_or_default()
    }
}

/// Lines of each server's log printed when a test fails.
const SERVER_LOG_LINES_SHOWN: usize = 80;

/// Where a test server started on `dir` writes its output: beside the directory, so
/// tests that list the directory see only the server's files.
fn server_log_path(dir: &Path) -> PathBuf {
    dir.with_extension("log")
}

fn server_output(dir: &Path) -> (Stdio, Stdio) {
    match std::fs::File::create(server_log_path(dir)) {
        Ok(f) => match f.try_clone() {
            Ok(g) => (Stdio::from(f), Stdio::from(g)),
            Err(_) => (Stdio::null(), Stdio::null()),
        },
        Err(_) => (Stdio::null(), Stdio::null()),
    }
}

/// A port that is free now, chosen below Linux's ephemeral range (32768+) so that the
/// many outgoing test connections cannot grab it between this probe and the server's bind.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let seed = std::process::id().wrapping_mul(2654435761) ^ NEXT.fetch_add(7919, Ordering::SeqCst);
    for i in 0..2000u32 {
        let port = 20000 + (seed.wrapping_add(i.wrapping_mul(104729)) % 12000) as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A fresh, empty directory of its own for each call (`tag` names it for a human reading
/// /tmp after a failure); the test or `ServerProc`'s drop removes it, and the first call
/// in a later test process removes those of processes that have ended
/// ([`remove_dirs_of_ended_runs`]).
pub fn temp_dir(tag: &str) -> PathBuf {
    static SWEPT: std::sync::Once = std::sync::Once::new();
    SWEPT.call_once(remove_dirs_of_ended_runs);
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let d = std::env::temp_dir().join(format!("cairn-test-{tag}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Removes the `cairn-test-<tag>-<pid>-<n>` directories whose process has ended: a test
/// that fails, or is killed, leaves its directory for a human to read, and runs after
/// runs of those (hundreds of MB each for some) filled the disk. Directories of running
/// processes (this one, other test binaries running beside it) are left alone; a reused
/// pid only keeps a stale directory a while longer.
fn remove_dirs_of_ended_runs() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix("cairn-test-")) else {
            continue;
        };
        let mut parts = rest.rsplitn(3, '-');
        let (Some(n), Some(pid), Some(_tag)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        let (Ok(_), Ok(pid)) = (n.parse::<u32>(), pid.parse::<i32>()) else {
            continue;
        };
        // SAFETY: signal 0 only checks that the process exists; nothing is sent.
        let gone = pid > 0
            && unsafe { libc::kill(pid, 0) } == -1
            && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
        if gone {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// How long a started server may take to answer PING, and how long `wait_until` callers
/// usually give a condition: generous, because a loaded 2-core machine running several
/// test binaries at once is slow, and a deadline only costs time when the test fails.
pub const DEADLINE: Duration = Duration::from_secs(30);

/// Polls `cond` until it holds; panics naming `what` when `deadline` passes first. For
/// anything a test would otherwise wait for with a fixed sleep: the wait ends as soon as
/// the condition holds and only a real failure reaches the deadline.
pub fn wait_until(deadline: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    if !poll_until(deadline, &mut cond) {
        panic!("timed out after {deadline:?} waiting until {what}");
    }
}

/// Polls `cond` until it holds or `deadline` passes; whether it held (checked one last time
/// at the deadline, so a slow poll still counts).
pub fn poll_until(deadline: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < deadline {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    cond()
}

fn wait_ready(port: u16, child: &mut Child) {
    if let Err(e) = try_wait_ready(port, child) {
        panic!("{e}");
    }
}

fn try_wait_ready(port: u16, child: &mut Child) -> Result<(), String> {
    wait_serving(child, port).map_err(|e| match e {
        NotServing::Exited(st) => format!("server exited during startup: {st}"),
        NotServing::Timeout => format!("server on port {port} did not become ready"),
    })
}

/// Why a started server is not serving.
#[derive(Debug)]
pub enum NotServing {
    /// The process ended (a refused startup, or a bind that lost a race).
    Exited(std::process::ExitStatus),
    /// It neither answered PING nor exited within `DEADLINE`; it has been killed.
    Timeout,
}

impl std::fmt::Display for NotServing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotServing::Exited(st) => write!(f, "exited: {st}"),
            NotServing::Timeout => write!(f, "not serving after {DEADLINE:?}"),
        }
    }
}

/// True when INFO on `s` names a process other than `pid`: another test's server got the
/// port between the probe and our child's bind (the child then exits at startup). A
/// server that refuses INFO (`requirepass`) is taken as ours.
fn someone_else_serves(s: &mut TcpStream, pid: u32) -> bool {
    if s.write_all(b"INFO server\r\n").is_err() {
        return false;
    }
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    // Bounded: the server section is a few KiB.
    while got.len() < 64 << 10 {
        match s.read(&mut buf) {
            Ok(n) if n > 0 => got.extend_from_slice(&buf[..n]),
            _ => break,
        }
        let text = String::from_utf8_lossy(&got);
        if let Some(at) = text.find("process_id:") {
            let digits: String = text[at + 11..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            if text[at + 11 + digits.len()..].starts_with("\r\n") {
                return digits.parse::<u32>().is_ok_and(|p| p != pid);
            }
        }
        if got.starts_with(b"-") && got.ends_with(b"\r\n") {
            break;
        }
    }
    false
}

/// Waits until the server answers PING with anything but -LOADING: serving, with its data
/// loaded (PING answers -LOADING while an image loads; -NOAUTH under `requirepass` is
/// serving too).
pub fn wait_serving(child: &mut Child, port: u16) -> Result<(), NotServing> {
    let start = Instant::now();
    while start.elapsed() < DEADLINE {
        if let Ok(Some(st)) = child.try_wait() {
            return Err(NotServing::Exited(st));
        }
        if let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) {
            let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
            let mut buf = [0u8; 64];
            if s.write_all(b"PING\r\n").is_ok()
                && s.read(&mut buf).is_ok_and(|n| n > 0)
                && !buf.starts_with(b"-LOADING")
                && !someone_else_serves(&mut s, child.id())
            {
                return Ok(());
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    if let Ok(Some(st)) = child.try_wait() {
        return Err(NotServing::Exited(st));
    }
    let _ = child.kill();
    let _ = child.wait();
    Err(NotServing::Timeout)
}

// ---- servers on a directory the test owns (restarts, damaged files) -------------------

/// A cairn-server on a directory the test owns: the directory outlives the process, so a
/// restart on it finds the image and the log. Killed with SIGKILL on drop.
pub struct Srv {
    pub child: Child,
    pub port: u16,
}

impl Drop for Srv {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The log file every server started by `cairn_command` writes, in its directory.
pub const LOG_FILE: &str = "cairn.log";

/// What the server on `dir` logged so far ("" before it started).
pub fn server_log(dir: &Path) -> String {
    std::fs::read_to_string(dir.join(LOG_FILE)).unwrap_or_default()
}

/// `cairn-server --port <free> --dir <dir> --logfile <dir>/cairn.log <args>` with `env`
/// set and stdout/stderr discarded, not yet spawned (a caller may still redirect output).
pub fn cairn_command(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> (Command, u16) {
    let port = free_port();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cairn-server"));
    cmd.args(["--port", &port.to_string(), "--dir"])
        .arg(dir)
        .arg("--logfile")
        .arg(dir.join(LOG_FILE))
        .args(args)
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    (cmd, port)
}

/// Starts cairn on `dir` and waits until it serves; Err (with the log) if it exits first
/// — a refused startup — or does not serve in time.
pub fn try_start_on(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Result<Srv, String> {
    // A port can be taken between the probe and the bind: the server then exits at
    // startup saying so, and starts again on another one.
    for attempt in 0.. {
        let (mut cmd, port) = cairn_command(dir, args, env);
        let mut child = cmd.spawn().expect("spawn cairn-server");
        match wait_serving(&mut child, port) {
            Ok(()) => return Ok(Srv { child, port }),
            Err(NotServing::Exited(_))
                if attempt < 3
                    && server_log(dir)
                        .lines()
                        .last()
                        .is_some_and(|l| l.contains("Address already in use")) =>
            {
                continue
            }
            Err(e) => return Err(format!("{e}: {}", server_log(dir))),
        }
    }
    unreachable!()
}

/// Starts cairn on `dir`; panics with its log if it does not serve.
pub fn start_on(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Srv {
    try_start_on(dir, args, env).unwrap_or_else(|e| panic!("{e}"))
}

/// Options a kind of test server starts with, before the test's own arguments.
pub const AOF_ON: &[&str] = &["--appendonly", "yes"];
pub const DEBUG_ON: &[&str] = &["--enable-debug-command", "yes"];

/// `base` then `args`, as one argument list.
pub fn with<'a>(base: &[&'a str], args: &[&'a str]) -> Vec<&'a str> {
    [base, args].concat()
}

/// A cairn with the append-only log on, on `dir`; Err (with the log) if startup fails.
pub fn try_start_aof(dir: &Path, args: &[&str]) -> Result<Srv, String> {
    try_start_on(dir, &with(AOF_ON, args), &[])
}

/// A cairn with the append-only log on, on `dir`; panics with the log if it fails.
pub fn start_aof(dir: &Path, args: &[&str]) -> Srv {
    start_aof_env(dir, args, &[])
}

/// `start_aof` with environment variables set for the server.
pub fn start_aof_env(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Srv {
    start_on(dir, &with(AOF_ON, args), env)
}

/// A cairn with DEBUG enabled (DEBUG DIGEST compares datasets), on `dir`.
pub fn start_debug(dir: &Path, args: &[&str]) -> Srv {
    start_debug_env(dir, args, &[])
}

/// `start_debug` with environment variables set for the server.
pub fn start_debug_env(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Srv {
    start_on(dir, &with(DEBUG_ON, args), env)
}

/// The incremental AOF file the manifest lists last (the one being written).
pub fn last_incr_file(dir: &Path) -> PathBuf {
    let m = std::fs::read_to_string(dir.join("appendonlydir/appendonly.aof.manifest")).unwrap();
    let name = m
        .lines()
        .rfind(|l| l.ends_with("type i"))
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .to_string();
    dir.join("appendonlydir").join(name)
}

/// Starts cairn-server with extra `--option value` arguments.
pub fn start_cairn(args: &[&str]) -> ServerProc {
    // A port can still be taken between the probe and the bind: then the server exits at
    // startup and we try again with another one.
    for attempt in 0..3 {
        let port = free_port();
        let dir = temp_dir("cairn");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_cairn-server"));
        cmd.arg("--port")
            .arg(port.to_string())
            .arg("--dir")
            .arg(&dir);
        cmd.args(args);
        let (out, err) = server_output(&dir);
        cmd.stdout(out).stderr(err);
        let mut child = cmd.spawn().expect("spawn cairn-server");
        match try_wait_ready(port, &mut child) {
            Ok(()) => return ServerProc { child, port, dir },
            Err(e) if attempt < 2 && e.contains("exited") => {
                let _ = std::fs::remove_dir_all(&dir);
                let _ = std::fs::remove_file(server_log_path(&dir));
                continue;
            }
            Err(e) => panic!("{e}"),
        }
    }
    unreachable!()
}

/// Path of Debian's redis-server, or a panic that says how to install it.
pub fn redis_server_path() -> String {
    for p in ["/usr/bin/redis-server", "/usr/local/bin/redis-server"] {
        if std::path::Path::new(p).exists() {
            return p.to_string();
        }
    }
    panic!("redis-server is needed for differential tests: apt-get install -y redis-server redis-tools");
}

/// Starts Debian's redis-server 7 with persistence off and extra arguments.
pub fn start_redis(args: &[&str]) -> ServerProc {
    let port = free_port();
    let dir = temp_dir("redis");
    let mut cmd = Command::new(redis_server_path());
    cmd.arg("--port")
        .arg(port.to_string())
        .arg("--dir")
        .arg(&dir);
    cmd.args(["--save", "", "--appendonly", "no", "--bind", "127.0.0.1"]);
    cmd.args(args);
    let (out, err) = server_output(&dir);
    cmd.stdout(out).stderr(err);
    let mut child = cmd.spawn().expect("spawn redis-server");
    wait_ready(port, &mut child);
    ServerProc { child, port, dir }
}

pub fn client(port: u16) -> redis::Connection {
    let c = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
    c.get_connection().unwrap()
}

/// A raw RESP connection for byte-exact checks.
pub struct Raw {
    pub s: TcpStream,
    buf: Vec<u8>,
}

impl Raw {
    pub fn connect(port: u16) -> Raw {
        let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        // A reply late by seconds on a busy machine is not a failure; a missing one
        // still ends the test.
        s.set_read_timeout(Some(DEADLINE)).unwrap();
        s.set_nodelay(true).unwrap();
        Raw { s, buf: Vec::new() }
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.s.write_all(bytes).unwrap();
    }

    /// Encodes args as a RESP multibulk command and sends it.
    pub fn cmd(&mut self, args: &[&[u8]]) {
        self.send(&encode(args));
    }

    /// Reads exactly one RESP reply (any type, nested) and returns its raw bytes.
    pub fn reply(&mut self) -> Vec<u8> {
        loop {
            if let Some(n) = reply_len(&self.buf) {
                return self.buf.drain(..n).collect();
            }
            let mut tmp = [0u8; 65536];
            // A read with a timeout is never restarted after a signal, even one the test
            // process does not handle (a stop and continue): it fails with EINTR.
            let n = match self.s.read(&mut tmp) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                r => r.expect("read reply"),
            };
            assert!(
                n > 0,
                "connection closed while waiting for a reply; got so far {:?}",
                String::from_utf8_lossy(&self.buf)
            );
            self.buf.extend_from_slice(&tmp[..n]);
        }
    }

    /// Sends a command and returns its raw reply.
    pub fn call(&mut self, args: &[&str]) -> Vec<u8> {
        let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
        self.cmd(&a);
        self.reply()
    }

    /// A field of `INFO <section>` (trimmed), None when INFO does not have it.
    pub fn info(&mut self, section: &str, field: &str) -> Option<String> {
        let text = String::from_utf8_lossy(&self.call(&["INFO", section])).into_owned();
        info_field(&text, field)
    }

    /// A field of `INFO <section>`; panics when INFO does not have it.
    pub fn info_field(&mut self, section: &str, field: &str) -> String {
        self.info(section, field)
            .unwrap_or_else(|| panic!("INFO {section} has no {field}"))
    }

    /// A numeric field of `INFO <section>`; panics when INFO does not have it.
    pub fn info_u64(&mut self, section: &str, field: &str) -> u64 {
        let v = self
            .info(section, field)
            .unwrap_or_else(|| panic!("INFO {section} has no {field}"));
        v.parse()
            .unwrap_or_else(|_| panic!("INFO {section} {field} is not a number: {v}"))
    }

    /// True if the server closed the connection (reads EOF) within the timeout.
    pub fn closed(&mut self) -> bool {
        let mut tmp = [0u8; 4096];
        loop {
            match self.s.read(&mut tmp) {
                Ok(0) => return true,
                Ok(n) => self.buf.extend_from_slice(&tmp[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        }
    }
}

/// Sends `args` on a plain socket and reads the first line of the reply (without its
/// CRLF); Err once the server is gone, for clients racing a kill the test makes (they
/// must end quietly, not panic).
pub fn try_call_line(s: &mut TcpStream, args: &[&str]) -> std::io::Result<String> {
    let a: Vec<&[u8]> = args.iter().map(|x| x.as_bytes()).collect();
    s.write_all(&encode(&a))?;
    let mut line = Vec::new();
    let mut b = [0u8; 1];
    while !line.ends_with(b"\r\n") {
        if s.read(&mut b)? == 0 {
            return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof));
        }
        line.push(b[0]);
    }
    line.truncate(line.len() - 2);
    Ok(String::from_utf8_lossy(&line).into_owned())
}

/// A field of an INFO text (trimmed), None when the text does not have it.
pub fn info_field(text: &str, field: &str) -> Option<String> {
    let prefix = format!("{field}:");
    text.lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .map(|v| v.trim().to_string())
}

/// A numeric field of an INFO text; panics when the text does not have it.
pub fn info_int(text: &str, field: &str) -> i64 {
    let v = info_field(text, field).unwrap_or_else(|| panic!("INFO has no {field}"));
    v.parse()
        .unwrap_or_else(|_| panic!("INFO {field} is not a number: {v}"))
}

/// `used_memory` of INFO memory.
pub fn used_memory(raw: &mut Raw) -> u64 {
    raw.info_u64("memory", "used_memory")
}

/// Waits until `used_memory` is back within 200 KB of `before` (a lazily freed value has
/// been freed by the background thread).
pub fn wait_memory_back(raw: &mut Raw, before: u64) {
    let mut now = 0;
    if !poll_until(DEADLINE, || {
        now = used_memory(raw);
        now <= before + 200_000
    }) {
        panic!("memory not returned: {before} -> {now}");
    }
}

/// The payload of a bulk-string reply.
pub fn bulk_payload(reply: &[u8]) -> Vec<u8> {
    assert_eq!(reply[0], b'$', "{:?}", String::from_utf8_lossy(reply));
    let nl = reply.windows(2).position(|w| w == b"\r\n").unwrap();
    let n: usize = std::str::from_utf8(&reply[1..nl]).unwrap().parse().unwrap();
    reply[nl + 2..nl + 2 + n].to_vec()
}

/// `v` as a RESP bulk string (`$<len>\r\n<v>\r\n`).
pub fn bulk(v: &[u8]) -> Vec<u8> {
    let mut b = format!("${}\r\n", v.len()).into_bytes();
    b.extend_from_slice(v);
    b.extend_from_slice(b"\r\n");
    b
}

pub fn encode(args: &[&[u8]]) -> Vec<u8> {
    let mut v = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        v.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        v.extend_from_slice(a);
        v.extend_from_slice(b"\r\n");
    }
    v
}

fn line_end(b: &[u8], from: usize) -> Option<usize> {
    b[from..]
        .windows(2)
        .position(|w| w == b"\r\n")
        .map(|p| from + p)
}

/// Length of the first complete RESP value in `b`, if complete.
pub fn reply_len(b: &[u8]) -> Option<usize> {
    value_end(b, 0)
}

fn value_end(b: &[u8], at: usize) -> Option<usize> {
    if at >= b.len() {
        return None;
    }
    let e = line_end(b, at)?;
    let head = std::str::from_utf8(&b[at + 1..e]).ok()?;
    match b[at] {
        b'+' | b'-' | b':' | b',' | b'#' | b'_' | b'(' => Some(e + 2),
        b'$' | b'=' | b'!' => {
            let n: i64 = head.parse().ok()?;
            if n < 0 {
                return Some(e + 2);
            }
            let end = e + 2 + n as usize + 2;
            (end <= b.len()).then_some(end)
        }
        b'*' | b'~' | b'>' | b'%' | b'|' => {
            let n: i64 = head.parse().ok()?;
            let mut pos = e + 2;
            if n < 0 {
                return Some(pos);
            }
            let items = if matches!(b[at], b'%' | b'|') {
                2 * n
            } else {
                n
            };
            for _ in 0..items {
                pos = value_end(b, pos)?;
            }
            Some(pos)
        }
        _ => panic!("not RESP: {:?}", String::from_utf8_lossy(&b[at..])),
    }
}

/// A small deterministic generator (64-bit LCG, high bits) for randomized scripts that
/// must replay the same on cairn and on redis-server.
pub struct Lcg(pub u64);

impl Lcg {
    pub fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

// ---- comparing cairn with redis-server ------------------------------------------------

/// A cairn and a redis-server started with the same arguments, a raw client to each.
pub fn both(args: &[&str]) -> (ServerProc, ServerProc, Raw, Raw) {
    let c = start_cairn(args);
    let r = start_redis(args);
    let rc = Raw::connect(c.port);
    let rr = Raw::connect(r.port);
    (c, r, rc, rr)
}

pub fn show(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Sends a command to both servers; their replies must be byte-identical.
pub fn same(rc: &mut Raw, rr: &mut Raw, args: &[&[u8]]) -> Vec<u8> {
    rc.cmd(args);
    let a = rc.reply();
    rr.cmd(args);
    let b = rr.reply();
    assert_eq!(
        show(&a),
        show(&b),
        "command {:?}",
        args.iter().map(|x| show(x)).collect::<Vec<_>>()
    );
    a
}

/// `same` with text arguments.
pub fn same_str(rc: &mut Raw, rr: &mut Raw, args: &[&str]) -> Vec<u8> {
    let a: Vec<&[u8]> = args.iter().map(|x| x.as_bytes()).collect();
    same(rc, rr, &a)
}

/// Each command on both servers: byte-identical replies.
pub fn same_replies(rc: &mut Raw, rr: &mut Raw, cmds: &[&[&str]]) {
    for cmd in cmds {
        same_str(rc, rr, cmd);
    }
}

/// Runs a script on both servers, one command a line (arguments split at spaces):
/// byte-identical replies, or for a line starting with "~ " the same reply lines in any
/// order.
pub fn run_script(rc: &mut Raw, rr: &mut Raw, script: &[&str]) {
    for line in script {
        match line.strip_prefix("~ ") {
            Some(rest) => same_unordered(rc, rr, &rest.split(' ').collect::<Vec<_>>()),
            None => {
                same_str(rc, rr, &line.split(' ').collect::<Vec<_>>());
            }
        }
    }
}

/// Replies compared as multisets of lines (for unspecified orders).
pub fn same_unordered(rc: &mut Raw, rr: &mut Raw, args: &[&str]) {
    let mut a: Vec<String> = show(&rc.call(args))
        .split("\r\n")
        .map(String::from)
        .collect();
    let mut b: Vec<String> = show(&rr.call(args))
        .split("\r\n")
        .map(String::from)
        .collect();
    a.sort();
    b.sort();
    assert_eq!(a, b, "command {args:?}");
}

/// Deterministic distinct values of varied lengths for the tiering tests (small ones
/// share tier pages, 6000+ byte ones take pages of their own); the first 8 bytes are `i`.
pub fn tier_value_of(i: usize, rng: &mut Lcg) -> Vec<u8> {
    let len = match i % 10 {
        0 => 100 + rng.below(200) as usize,
        1 => 6000 + rng.below(3000) as usize,
        _ => 700 + rng.below(600) as usize,
    };
    let mut v: Vec<u8> = (0..len).map(|_| rng.below(256) as u8).collect();
    v[..8].copy_from_slice(&(i as u64).to_le_bytes());
    v
}

/// Runs `cmds` pipelined in batches, each expected to answer a reply starting with `ok`;
/// the writes refused with -OOM (the tier's disk has not caught up) are sent again,
/// exactly those, once `used_memory` went below `maxmemory` again (a refused write
/// changed nothing). A refused command runs after the ones sent behind it, so no two
/// commands may name the same key (checked: the key is each command's second word).
pub fn run_all_making_room(raw: &mut Raw, cmds: &[Vec<Vec<u8>>], ok: &[u8], maxmemory: u64) {
    let mut keys = std::collections::HashSet::new();
    for (i, c) in cmds.iter().enumerate() {
        if let Some(k) = c.get(1) {
            assert!(
                keys.insert(k.as_slice()),
                "command {i} names key {} again: a refused command would run out of order",
                String::from_utf8_lossy(k)
            );
        }
    }
    let mut pending: Vec<usize> = (0..cmds.len()).collect();
    let mut rounds = 0;
    while !pending.is_empty() {
        rounds += 1;
        assert!(rounds < 2000, "the tier never made room");
        let mut refused = Vec::new();
        for chunk in pending.chunks(100) {
            let mut buf = Vec::new();
            for &i in chunk {
                let parts: Vec<&[u8]> = cmds[i].iter().map(Vec::as_slice).collect();
                buf.extend_from_slice(&encode(&parts));
            }
            raw.send(&buf);
            for &i in chunk {
                let r = raw.reply();
                if r.starts_with(b"-OOM") {
                    refused.push(i);
                } else {
                    assert!(r.starts_with(ok), "command {i}: {}", show(&r));
                }
            }
            if !refused.is_empty() {
                wait_until(DEADLINE, "memory goes below maxmemory again", || {
                    used_memory(raw) + 64 * 1024 < maxmemory
                });
            }
        }
        pending = refused;
    }
}
