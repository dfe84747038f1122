//! Command families and their registration tables. Each family file exports
//! `COMMANDS: &[CommandSpec]` — metadata as data (arity, flags, key positions) plus the
//! handler — and this module merges them into one lookup table.
//!
//! Architecture invariant: command code never touches a socket or a file descriptor; it
//! reads its arguments from [`Ctx::args`] and writes RESP into [`Ctx::out`].

pub mod acl;
pub mod aof;
pub mod bits;
pub mod connection;
pub mod docs;
pub mod executor;
pub mod geo;
pub mod hashes;
pub mod hll;
pub mod key_specs;
pub mod keys;
pub mod lists;
pub mod lolwut;
pub mod migrate;
pub mod notify;
pub mod persistence;
pub mod propagate;
pub mod pubsub;
pub mod replication;
pub mod scripting;
pub mod server;
pub mod sets;
pub mod sort;
pub mod sort_algo;
pub mod stream_groups;
pub mod streams;
pub mod strings;
pub mod transactions;
pub mod zsets;

use crate::commands::executor::{Client, Server};
use crate::protocol::reply::Reply;
use std::collections::HashMap;
use std::hash::BuildHasherDefault;

// Command flags (Redis's names).
pub const WRITE: u32 = 1 << 0;
pub const READONLY: u32 = 1 << 1;
pub const DENYOOM: u32 = 1 << 2;
pub const ADMIN: u32 = 1 << 3;
pub const PUBSUB: u32 = 1 << 4;
pub const NOSCRIPT: u32 = 1 << 5;
pub const BLOCKING: u32 = 1 << 6;
pub const LOADING: u32 = 1 << 7;
pub const STALE: u32 = 1 << 8;
pub const SKIP_MONITOR: u32 = 1 << 9;
pub const SKIP_SLOWLOG: u32 = 1 << 10;
pub const FAST: u32 = 1 << 11;
pub const NO_AUTH: u32 = 1 << 12;
pub const MAY_REPLICATE: u32 = 1 << 13;
pub const NO_MULTI: u32 = 1 << 14;
pub const ALLOW_BUSY: u32 = 1 << 15;
/// Runs even when the client is in RESP2 pubsub mode (PING, SUBSCRIBE...).
pub const PUBSUB_OK: u32 = 1 << 16;
/// DEBUG and friends: gated by `enable-debug-command`.
pub const PROTECTED: u32 = 1 << 17;
// cairn's own dispatch flags (not shown by COMMAND): what the executor's pipeline needs to
// know of a command, so that it has no command-name special cases.
/// Runs at once inside MULTI instead of being queued (EXEC, DISCARD, MULTI, WATCH, QUIT,
/// RESET).
pub const RUNS_IN_MULTI: u32 = 1 << 18;
/// Admitted with the flags of the commands it holds (EXEC: Redis's mstate cmd_flags).
pub const TAKES_QUEUED_FLAGS: u32 = 1 << 19;
/// Refused like a write after a failed background save (PING, so clients notice).
pub const MISCONF_REFUSED: u32 = 1 << 20;
/// Queued inside MULTI without the memory check queueing otherwise gets (UNWATCH).
pub const QUEUES_WITHOUT_OOM_CHECK: u32 = 1 << 21;
/// MONITOR sees it before it runs, though it is `skip_monitor` (EVAL and friends: their
/// line comes before those of the commands the script runs, as Redis 7's).
pub const MONITOR_FIRST: u32 = 1 << 22;
// Shown by COMMAND only: cairn has no cluster slots and never loads asynchronously, but
// clients read these as Redis 7.0 declares them.
/// A command whose keys may all be absent (EVAL and FCALL with numkeys 0).
pub const NO_MANDATORY_KEYS: u32 = 1 << 23;
/// Refused during an asynchronous load in Redis (SAVE, BGSAVE, SYNC, REPLICAOF...).
pub const NO_ASYNC_LOADING: u32 = 1 << 24;

pub const FLAG_NAMES: &[(u32, &str)] = &[
    (WRITE, "write"),
    (READONLY, "readonly"),
    (DENYOOM, "denyoom"),
    (ADMIN, "admin"),
    (PUBSUB, "pubsub"),
    (NOSCRIPT, "noscript"),
    (BLOCKING, "blocking"),
    (LOADING, "loading"),
    (STALE, "stale"),
    (SKIP_MONITOR, "skip_monitor"),
    (SKIP_SLOWLOG, "skip_slowlog"),
    (FAST, "fast"),
    (NO_AUTH, "no_auth"),
    // MAY_REPLICATE is not shown: Redis 7.0 hides it from COMMAND on purpose.
    (NO_MANDATORY_KEYS, "no_mandatory_keys"),
    (NO_ASYNC_LOADING, "no_async_loading"),
    (NO_MULTI, "no_multi"),
    // `movablekeys` comes here, from the key procs (`introspection::write_command_info`).
    (ALLOW_BUSY, "allow_busy"),
];

pub type CmdResult = Result<(), CmdError>;
pub type Handler = fn(&mut Ctx) -> CmdResult;

#[derive(Clone, Copy)]
pub struct CommandSpec {
    /// Lowercase name (for a subcommand, the part after the container).
    pub name: &'static str,
    /// Redis arity: N exact, -N at least N (counting the command name).
    pub arity: i32,
    pub flags: u32,
    pub first_key: i32,
    pub last_key: i32,
    pub key_step: i32,
    /// Redis's command group ("string", "generic", "server", "connection", ...).
    pub group: &'static str,
    pub summary: &'static str,
    pub since: &'static str,
    pub handler: Handler,
    pub subcommands: &'static [CommandSpec],
    /// The ACL categories Redis's command table declares for it (`acl_categories` in its
    /// JSON files); the ones Redis implies from flags are added by
    /// [`acl::categories`]. Defaults from the group (see [`acl::group_categories`]).
    pub acl: u32,
}

impl CommandSpec {
    /// A command with no keys.
    pub const fn new(
        name: &'static str,
        arity: i32,
        flags: u32,
        group: &'static str,
        handler: Handler,
    ) -> CommandSpec {
        CommandSpec {
            name,
            arity,
            flags,
            first_key: 0,
            last_key: 0,
            key_step: 0,
            group,
            summary: "",
            since: "1.0.0",
            handler,
            subcommands: &[],
            acl: acl::group_categories(group),
        }
    }
    /// Declares the command's ACL categories, replacing its group's default.
    pub const fn acl(mut self, categories: u32) -> CommandSpec {
        self.acl = categories;
        self
    }
    pub const fn keys(mut self, first: i32, last: i32, step: i32) -> CommandSpec {
        self.first_key = first;
        self.last_key = last;
        self.key_step = step;
        self
    }
    pub const fn doc(mut self, summary: &'static str, since: &'static str) -> CommandSpec {
        self.summary = summary;
        self.since = since;
        self
    }
    pub const fn subs(mut self, subs: &'static [CommandSpec]) -> CommandSpec {
        self.subcommands = subs;
        self
    }
    pub fn arity_ok(&self, argc: usize) -> bool {
        let argc = argc as i32;
        (self.arity > 0 && argc == self.arity) || (self.arity < 0 && argc >= -self.arity)
    }
}

/// Errors a command returns; rendered with Redis's exact texts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CmdError {
    #[error("WRONGTYPE Operation against a key holding the wrong kind of value")]
    WrongType,
    #[error("ERR syntax error")]
    Syntax,
    #[error("ERR value is not an integer or out of range")]
    NotInteger,
    #[error("ERR value is not a valid float")]
    NotFloat,
    #[error("ERR increment or decrement would overflow")]
    Overflow,
    #[error("ERR no such key")]
    NoSuchKey,
    #[error("ERR DB index is out of range")]
    DbIndexOutOfRange,
    #[error("ERR invalid expire time in '{0}' command")]
    InvalidExpire(&'static str),
    #[error("OOM command not allowed when used memory > 'maxmemory'.")]
    Oom,
    /// Any other error: the full text including its code (`ERR ...`).
    #[error("{0}")]
    Other(String),
}

impl CmdError {
    pub fn err(msg: impl Into<String>) -> CmdError {
        let m = msg.into();
        CmdError::Other(format!("ERR {m}"))
    }
    pub fn raw(msg: impl Into<String>) -> CmdError {
        CmdError::Other(msg.into())
    }
}

pub use crate::protocol::request::Args;

/// An argument that should have been an integer answers Redis's "not an integer" error.
impl From<crate::protocol::request::NotAnInteger> for CmdError {
    fn from(_: crate::protocol::request::NotAnInteger) -> CmdError {
        CmdError::NotInteger
    }
}

/// Everything a command handler can reach.
pub struct Ctx<'a> {
    pub srv: &'a mut Server,
    pub client: &'a mut Client,
    pub args: Args<'a>,
    pub out: Reply<'a>,
    pub now_ms: i64,
    pub spec: &'static CommandSpec,
}

impl Ctx<'_> {
    /// Refuses with -OOM a write about to allocate about `bytes` of arena beyond its
    /// arguments (a grown string, a stored result, a copy) when that would eat into the
    /// last half of the arena's write reserve ([`Server::arena_reserve_bytes`]). Called
    /// before the command changes anything, so a refusal leaves no half-done write.
    pub fn ensure_arena_room(&mut self, bytes: u64) -> CmdResult {
        // Size classes round up by at most an eighth.
        let bytes = bytes.saturating_add(bytes / 8);
        if !self
            .srv
            .arena_admits(self.srv.arena_reserve_bytes() / 2, bytes)
        {
            self.srv.stats.arena_oom_refusals += 1;
            return Err(CmdError::Oom);
        }
        Ok(())
    }

    /// A bulk reply of entry `e`'s value. A large out-of-line value is queued as a
    /// reference (the socket writer sends it from the arena) when the connection allows
    /// it (`Server::execute_refs`); otherwise it is copied.
    pub fn bulk_value(&mut self, e: crate::arena::Ref) {
        let len = self.srv.ks.value(e).len();
        if len as u64 >= self.srv.reply_refs_min && !self.srv.dataset_swap_pending {
            if let Some((block, len)) = self.srv.ks.pin_value(e) {
                self.out.bulk_header(len);
                let pos = self.out.buf.len();
                let addr = self.srv.ks.block_ptr(block) as usize;
                // SAFETY: `pin_value` just pinned `block` for this segment (unpinned only
                // after the segment is written or dropped), and `len` bytes of its value
                // start at `block_ptr(block)`.
                let seg =
                    unsafe { crate::commands::executor::RefSeg::pinned(pos, block, len, addr) };
                self.srv.reply_refs.push(seg);
                self.out.buf.extend_from_slice(b"\r\n");
                return;
            }
        }
        self.out.bulk(self.srv.ks.value(e));
    }

    #[inline]
    pub fn db(&self) -> usize {
        self.client.db
    }
    /// Counts a change for `rdb_changes_since_last_save` and key-modification hooks.
    #[inline]
    pub fn dirty(&mut self, n: u64) {
        self.srv.dirty += n;
    }
}

/// The merged table, built once.
/// FNV-1a over a command name (see `CommandTable::by_name`).
#[derive(Default)]
pub struct NameHasher(u64);

impl std::hash::Hasher for NameHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 {
            0xcbf2_9ce4_8422_2325
        } else {
            self.0
        };
        for &b in bytes {
            h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
        }
        self.0 = h;
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

pub struct CommandTable {
    /// FNV-1a, not SipHash: the keys are the fixed command names (nothing a client sends
    /// is ever inserted, so there is no collision attack), and the lookup runs per command.
    by_name: HashMap<Vec<u8>, &'static CommandSpec, BuildHasherDefault<NameHasher>>,
    pub all: Vec<&'static CommandSpec>,
}

/// Every family's table (a slice, so adding a family is one line).
pub fn all_families() -> Vec<&'static [CommandSpec]> {
    vec![
        acl::command::COMMANDS,
        aof::COMMANDS,
        bits::COMMANDS,
        connection::COMMANDS,
        geo::COMMANDS,
        hashes::COMMANDS,
        hll::COMMANDS,
        keys::COMMANDS,
        lists::COMMANDS,
        lolwut::COMMANDS,
        migrate::COMMANDS,
        persistence::COMMANDS,
        replication::COMMANDS,
        pubsub::COMMANDS,
        server::COMMANDS,
        sets::COMMANDS,
        sort::COMMANDS,
        strings::COMMANDS,
        zsets::COMMANDS,
        streams::COMMANDS,
        stream_groups::COMMANDS,
        transactions::COMMANDS,
        scripting::COMMANDS,
        scripting::functions::COMMANDS,
    ]
}

impl CommandTable {
    pub fn build() -> CommandTable {
        let mut by_name = HashMap::default();
        let mut all = Vec::new();
        for fam in all_families() {
            for spec in fam.iter() {
                let prev = by_name.insert(spec.name.as_bytes().to_vec(), spec);
                assert!(prev.is_none(), "command {} registered twice", spec.name);
                all.push(spec);
            }
        }
        all.sort_by_key(|s| s.name);
        CommandTable { by_name, all }
    }

    #[inline]
    pub fn lookup(&self, name: &[u8]) -> Option<&'static CommandSpec> {
        let mut buf = [0u8; 32];
        if name.len() <= buf.len() {
            for (d, s) in buf.iter_mut().zip(name) {
                *d = s.to_ascii_lowercase();
            }
            self.by_name.get(&buf[..name.len()]).copied()
        } else {
            self.by_name.get(&name.to_ascii_lowercase()).copied()
        }
    }

    /// `rename-command old new`: the command answers to `new` only (`new` empty: to
    /// nothing), as Redis. Err: Redis's text when `old` is no command (a renamed one
    /// included).
    pub fn rename(&mut self, old: &str, new: &str) -> Result<(), String> {
        let Some(spec) = self.by_name.remove(old.to_ascii_lowercase().as_bytes()) else {
            return Err(format!("rename-command: no such command '{old}'"));
        };
        if !new.is_empty() {
            let key = new.to_ascii_lowercase().into_bytes();
            if self.by_name.contains_key(&key) {
                return Err(format!(
                    "rename-command: the new name '{new}' is already taken"
                ));
            }
            self.by_name.insert(key, spec);
        }
        Ok(())
    }

    pub fn len(&self) -> usize {
        self.all.len()
    }
    pub fn is_empty(&self) -> bool {
        self.all.is_empty()
    }
}

/// `container|sub` name of a subcommand, as Redis's `fullname`.
pub fn full_name(parent: &CommandSpec, sub: &CommandSpec) -> String {
    format!("{}|{}", parent.name, sub.name)
}

/// HDEL / SREM / ZREM: removes arguments 2.. from the collection `e` (found by the
/// caller's typed lookup; None: the key is missing), deleting the key when it empties.
/// `remove` returns the (possibly moved) entry and whether the member was there.
/// `event`: the notification (class, name) when anything was removed (`del` follows
/// when the key went).
pub fn remove_members(
    ctx: &mut Ctx,
    event: (u32, &'static str),
    found: Option<crate::arena::Ref>,
    remove: fn(
        &mut crate::keyspace::Keyspace,
        usize,
        crate::arena::Ref,
        &[u8],
    ) -> (crate::arena::Ref, bool),
    len: fn(&crate::keyspace::Keyspace, crate::arena::Ref) -> u64,
) -> CmdResult {
    let db = ctx.db();
    let Some(mut e) = found else {
        ctx.out.int(0);
        return Ok(());
    };
    let mut n = 0;
    let mut key_removed = false;
    for i in 2..ctx.args.len() {
        let (ne, removed) = remove(&mut ctx.srv.ks, db, e, ctx.args.get(i));
        e = ne;
        if removed {
            n += 1;
            if len(&ctx.srv.ks, e) == 0 {
                ctx.srv.ks.delete_entry(db, e);
                key_removed = true;
                break;
            }
        }
    }
    if n > 0 {
        let key = ctx.args.get(1);
        notify::notify(ctx, event.0, event.1, key);
        if key_removed {
            notify::notify(ctx, notify::NOTIFY_GENERIC, "del", key);
        }
    }
    ctx.dirty(n);
    ctx.out.int(n as i64);
    Ok(())
}

/// A looked-up entry checked for the kind a command family works on: WRONGTYPE otherwise
/// (None, a missing key, passes through).
pub fn of_kind(
    ctx: &Ctx,
    e: Option<crate::arena::Ref>,
    kind: crate::keyspace::Kind,
) -> Result<Option<crate::arena::Ref>, CmdError> {
    match e {
        Some(e) if ctx.srv.ks.kind(e) != kind => Err(CmdError::WrongType),
        other => Ok(other),
    }
}

/// HRANDFIELD / SRANDMEMBER / ZRANDMEMBER with a negative count repeat elements; beyond
/// this many the reply alone would be gigabytes (Redis 7.0 tries and runs out of memory),
/// so it is refused instead of built.
pub const MAX_RANDOM_REPEATS: u64 = 1 << 24;
