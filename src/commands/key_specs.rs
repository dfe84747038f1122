//! What Redis 7.0 declares about a command beyond its arity and flags: its key specs (where
//! its keys are and how it uses them) and its tips, by full command name (`object|encoding`).
//! COMMAND INFO shows them (fields 8 and 9) and COMMAND GETKEYS / GETKEYSANDFLAGS finds keys
//! with them, falling back, as Redis does, to the command's own key finder when a spec cannot
//! tell (numkeys that is not a number, an `unknown` or `incomplete` spec, `variable_flags`).
//!
//! The rows are data: one per command or subcommand that has tips or keys, sorted by name.

use crate::protocol::request::Args;

// Key-spec flags (Redis's `CMD_KEY_*`), in the order COMMAND shows them.
pub const RO: u16 = 1 << 0;
pub const RW: u16 = 1 << 1;
pub const OW: u16 = 1 << 2;
pub const RM: u16 = 1 << 3;
pub const ACCESS: u16 = 1 << 4;
pub const UPDATE: u16 = 1 << 5;
pub const INSERT: u16 = 1 << 6;
pub const DELETE: u16 = 1 << 7;
pub const NOT_KEY: u16 = 1 << 8;
pub const INCOMPLETE: u16 = 1 << 9;
pub const VARIABLE_FLAGS: u16 = 1 << 10;

pub const KEY_FLAG_NAMES: &[(u16, &str)] = &[
    (RO, "RO"),
    (RW, "RW"),
    (OW, "OW"),
    (RM, "RM"),
    (ACCESS, "access"),
    (UPDATE, "update"),
    (INSERT, "insert"),
    (DELETE, "delete"),
    (NOT_KEY, "not_key"),
    (INCOMPLETE, "incomplete"),
    (VARIABLE_FLAGS, "variable_flags"),
];

/// Where the search for a spec's keys starts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Begin {
    /// At this argument index.
    Index(i32),
    /// After this keyword, searched from `startfrom` (from the end when negative).
    Keyword(&'static str, i32),
    Unknown,
}

/// How a spec's keys are found from where the search began.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Find {
    /// `lastkey` (relative to the first key, or from the end when negative), `keystep`,
    /// `limit` (with lastkey -1: only 1/limit of the remaining arguments are keys).
    Range(i32, i32, i32),
    /// `keynumidx` (where numkeys is, relative to the start), `firstkey` (relative to the
    /// start), `keystep`.
    Keynum(i32, i32, i32),
    Unknown,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct KeySpec {
    pub notes: &'static str,
    pub flags: u16,
    pub begin: Begin,
    pub find: Find,
}

impl KeySpec {
    const fn note(mut self, notes: &'static str) -> KeySpec {
        self.notes = notes;
        self
    }
}

const fn ks(flags: u16, begin: Begin, find: Find) -> KeySpec {
    KeySpec {
        notes: "",
        flags,
        begin,
        find,
    }
}

/// The common spec: one key at argument `index`.
const fn one(index: i32, flags: u16) -> KeySpec {
    ks(flags, Begin::Index(index), Find::Range(0, 1, 0))
}

pub struct Meta {
    /// Full lowercase name (`container|sub` for a subcommand).
    pub name: &'static str,
    pub tips: &'static [&'static str],
    pub key_specs: &'static [KeySpec],
}

impl Meta {
    const fn new(
        name: &'static str,
        tips: &'static [&'static str],
        key_specs: &'static [KeySpec],
    ) -> Meta {
        Meta {
            name,
            tips,
            key_specs,
        }
    }
}

/// A command's row; commands without one have no tips and no keys.
pub fn lookup(full_name: &str) -> Option<&'static Meta> {
    META.binary_search_by(|m| m.name.cmp(full_name))
        .ok()
        .map(|i| &META[i])
}

fn key_specs(full_name: &str) -> &'static [KeySpec] {
    lookup(full_name).map_or(&[], |m| m.key_specs)
}

/// Commands with a key finder of their own (Redis's getkeys procs): those whose keys
/// `propagate::keys_of` finds from their arguments (numkeys forms, SORT's STORE, MIGRATE's
/// KEYS, the streams' STREAMS), plus SET's and BITFIELD's flags, which depend on their
/// arguments though their keys do not.
fn has_key_proc(full_name: &str) -> bool {
    super::propagate::has_key_proc(full_name) || matches!(full_name, "set" | "bitfield")
}

/// Whether COMMAND GETKEYS can find keys for the command at all (else: "The command has
/// no key arguments"): a key finder, or a spec for something that is a key.
pub fn has_keys(full_name: &str) -> bool {
    has_key_proc(full_name) || key_specs(full_name).iter().any(|s| s.flags & NOT_KEY == 0)
}

/// The keys of a command line (`args` starts at the command's name) with their flags, as
/// Redis's COMMAND GETKEYS finds them; empty when the arguments do not hold the keys they
/// declare.
pub fn keys_with_flags(full_name: &str, args: Args) -> Vec<(usize, u16)> {
    let specs = key_specs(full_name);
    let has_keyspec = specs.iter().any(|s| s.flags & NOT_KEY == 0);
    let variable = specs.iter().any(|s| s.flags & VARIABLE_FLAGS != 0);
    if has_keyspec && !variable {
        if let Some(keys) = keys_from_specs(specs, args) {
            return keys;
        }
    }
    keys_from_proc(full_name, args)
}

/// Compares an argument with a word as C's `strcasecmp` on Redis's strings does (an
/// argument ends at its first NUL byte there).
fn c_is(arg: &[u8], word: &str) -> bool {
    let end = arg.iter().position(|&b| b == 0).unwrap_or(arg.len());
    arg[..end].eq_ignore_ascii_case(word.as_bytes())
}

/// C's `atoi` as Redis's key finders read numkeys: leading blanks, a sign, digits up to
/// the first other byte; saturated as `strtol` and truncated to an `int`.
fn c_atoi(arg: &[u8]) -> i32 {
    let mut i = 0;
    while i < arg.len() && matches!(arg[i], b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r') {
        i += 1;
    }
    let negative = i < arg.len() && arg[i] == b'-';
    if i < arg.len() && (arg[i] == b'-' || arg[i] == b'+') {
        i += 1;
    }
    let mut n: i64 = 0;
    while i < arg.len() && arg[i].is_ascii_digit() {
        let d = (arg[i] - b'0') as i64;
        n = if negative {
            n.saturating_mul(10).saturating_sub(d)
        } else {
            n.saturating_mul(10).saturating_add(d)
        };
        i += 1;
    }
    n as i32
}

/// Redis's key-spec walk; None: a spec cannot tell (unknown, incomplete, a bad numkeys, keys
/// past the end), so the command's own finder decides.
fn keys_from_specs(specs: &[KeySpec], args: Args) -> Option<Vec<(usize, u16)>> {
    let argc = args.len() as i64;
    let mut keys = Vec::new();
    for spec in specs {
        if spec.flags & NOT_KEY != 0 {
            continue;
        }
        let first: i64 = match spec.begin {
            Begin::Index(at) => at as i64,
            Begin::Keyword(word, startfrom) => {
                let (start, end) = if startfrom > 0 {
                    (startfrom as i64, argc - 1)
                } else {
                    (argc + startfrom as i64, 1)
                };
                let mut found = 0;
                let mut i = start;
                while i != end {
                    if i >= argc || i < 1 {
                        break;
                    }
                    if c_is(args.get(i as usize), word) {
                        found = i + 1;
                        break;
                    }
                    i += if start <= end { 1 } else { -1 };
                }
                if found == 0 {
                    continue;
                }
                found
            }
            Begin::Unknown => return None,
        };
        let (first, last, step) = match spec.find {
            Find::Range(lastkey, keystep, limit) => {
                let last = if lastkey >= 0 {
                    first + lastkey as i64
                } else if limit == 0 {
                    argc + lastkey as i64
                } else {
                    first + ((argc - first) / limit as i64 + lastkey as i64)
                };
                (first, last, keystep as i64)
            }
            Find::Keynum(keynumidx, firstkey, keystep) => {
                let at = first + keynumidx as i64;
                if keynumidx as i64 >= argc || at >= argc {
                    return None;
                }
                let numkeys = crate::util::parse_i64(args.get(at as usize)).filter(|&n| n >= 0)?;
                // Redis keeps numkeys in an `int` here.
                let first = first + firstkey as i64;
                (first, first + (numkeys as i32) as i64 - 1, keystep as i64)
            }
            Find::Unknown => return None,
        };
        if last >= argc || last < first || first >= argc || step < 1 {
            return None;
        }
        let mut i = first;
        while i <= last {
            keys.push((i as usize, spec.flags));
            i += step;
        }
        if spec.flags & INCOMPLETE != 0 {
            return None;
        }
    }
    Some(keys)
}

/// Redis's getkeys procs, for when the specs cannot tell.
fn keys_from_proc(full_name: &str, args: Args) -> Vec<(usize, u16)> {
    let argc = args.len();
    match full_name {
        "zunionstore" | "zinterstore" | "zdiffstore" => numkeys_proc(args, Some(1), 2, 3),
        "zunion" | "zinter" | "zdiff" | "zintercard" | "sintercard" | "lmpop" | "zmpop" => {
            numkeys_proc(args, None, 1, 2)
        }
        "blmpop" | "bzmpop" | "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall"
        | "fcall_ro" => numkeys_proc(args, None, 2, 3),
        "sort" => {
            let mut keys = vec![(1, RO | ACCESS)];
            let mut store = None;
            let mut i = 2;
            while i < argc {
                let arg = args.get(i);
                if c_is(arg, "limit") {
                    i += 2;
                } else if c_is(arg, "get") || c_is(arg, "by") {
                    i += 1;
                } else if c_is(arg, "store") && i + 1 < argc {
                    // The last STORE wins, as SORT reads it.
                    store = Some(i + 1);
                }
                i += 1;
            }
            keys.extend(store.map(|at| (at, OW | UPDATE)));
            keys
        }
        "sort_ro" => vec![(1, RO | ACCESS)],
        "migrate" if argc > 3 => {
            let mut first = 3;
            let mut num = 1;
            if let Some(at) = (6..argc).find(|&i| c_is(args.get(i), "keys")) {
                if !args.get(3).is_empty() {
                    return vec![];
                }
                first = at + 1;
                num = argc - first;
            }
            (first..first + num)
                .map(|i| (i, RW | ACCESS | DELETE))
                .collect()
        }
        "set" => {
            let get = (3..argc).any(|i| c_is(args.get(i), "get"));
            vec![(
                1,
                if get {
                    RW | ACCESS | UPDATE
                } else {
                    OW | UPDATE
                },
            )]
        }
        "bitfield" => {
            let mut readonly = true;
            let mut i = 2;
            while i < argc {
                let rest = argc - i - 1;
                let arg = args.get(i);
                if c_is(arg, "get") && rest >= 2 {
                    i += 2;
                } else if (c_is(arg, "set") || c_is(arg, "incrby")) && rest >= 3 {
                    readonly = false;
                    break;
                } else if c_is(arg, "overflow") && rest >= 1 {
                    i += 1;
                } else {
                    // A syntax error: assume it writes.
                    readonly = false;
                    break;
                }
                i += 1;
            }
            vec![(
                1,
                if readonly {
                    RO | ACCESS
                } else {
                    RW | ACCESS | UPDATE
                },
            )]
        }
        // GEORADIUS's STORE specs and XREAD's STREAMS spec always tell when there are
        // keys to tell; their finders find none where the specs fail.
        _ => vec![],
    }
}

/// Redis's generic numkeys finder: `numkeys` at `count_at` read as `atoi`, keys from
/// `first_at`, then the destination; no flags.
fn numkeys_proc(
    args: Args,
    store_at: Option<usize>,
    count_at: usize,
    first_at: usize,
) -> Vec<(usize, u16)> {
    let argc = args.len();
    if count_at >= argc {
        return vec![];
    }
    let num = c_atoi(args.get(count_at));
    if num < 1 || num as i64 > argc as i64 - first_at as i64 {
        return vec![];
    }
    let mut keys: Vec<(usize, u16)> = (first_at..first_at + num as usize)
        .map(|i| (i, 0))
        .collect();
    keys.extend(store_at.map(|at| (at, 0)));
    keys
}

#[rustfmt::skip]
static META: &[Meta] = &[
    Meta::new("append", &[], &[one(1, RW | INSERT)]),
    Meta::new("bitcount", &[], &[one(1, RO | ACCESS)]),
    Meta::new("bitfield", &[], &[one(1, RW | ACCESS | UPDATE | VARIABLE_FLAGS).note("This command allows both access and modification of the key")]),
    Meta::new("bitfield_ro", &[], &[one(1, RO | ACCESS)]),
    Meta::new("bitop", &[], &[one(2, OW | UPDATE), ks(RO | ACCESS, Begin::Index(3), Find::Range(-1, 1, 0))]),
    Meta::new("bitpos", &[], &[one(1, RO | ACCESS)]),
    Meta::new("blmove", &[], &[one(1, RW | ACCESS | DELETE), one(2, RW | INSERT)]),
    Meta::new("blmpop", &[], &[ks(RW | ACCESS | DELETE, Begin::Index(2), Find::Keynum(0, 1, 1))]),
    Meta::new("blpop", &[], &[ks(RW | ACCESS | DELETE, Begin::Index(1), Find::Range(-2, 1, 0))]),
    Meta::new("brpop", &[], &[ks(RW | ACCESS | DELETE, Begin::Index(1), Find::Range(-2, 1, 0))]),
    Meta::new("brpoplpush", &[], &[one(1, RW | ACCESS | DELETE), one(2, RW | INSERT)]),
    Meta::new("bzmpop", &[], &[ks(RW | ACCESS | DELETE, Begin::Index(2), Find::Keynum(0, 1, 1))]),
    Meta::new("bzpopmax", &[], &[ks(RW | ACCESS | DELETE, Begin::Index(1), Find::Range(-2, 1, 0))]),
    Meta::new("bzpopmin", &[], &[ks(RW | ACCESS | DELETE, Begin::Index(1), Find::Range(-2, 1, 0))]),
    Meta::new("client|info", &["nondeterministic_output"], &[]),
    Meta::new("client|list", &["nondeterministic_output"], &[]),
    Meta::new("cluster|bumpepoch", &["nondeterministic_output"], &[]),
    Meta::new("cluster|count-failure-reports", &["nondeterministic_output"], &[]),
    Meta::new("cluster|getkeysinslot", &["nondeterministic_output"], &[]),
    Meta::new("cluster|info", &["nondeterministic_output"], &[]),
    Meta::new("cluster|links", &["nondeterministic_output"], &[]),
    Meta::new("cluster|nodes", &["nondeterministic_output"], &[]),
    Meta::new("cluster|replicas", &["nondeterministic_output"], &[]),
    Meta::new("cluster|shards", &["nondeterministic_output"], &[]),
    Meta::new("cluster|slaves", &["nondeterministic_output"], &[]),
    Meta::new("cluster|slots", &["nondeterministic_output"], &[]),
    Meta::new("command", &["nondeterministic_output_order"], &[]),
    Meta::new("command|docs", &["nondeterministic_output_order"], &[]),
    Meta::new("command|info", &["nondeterministic_output_order"], &[]),
    Meta::new("command|list", &["nondeterministic_output_order"], &[]),
    Meta::new("config|set", &["request_policy:all_nodes", "response_policy:all_succeeded"], &[]),
    Meta::new("copy", &[], &[one(1, RO | ACCESS), one(2, OW | UPDATE)]),
    Meta::new("dbsize", &["request_policy:all_shards", "response_policy:agg_sum"], &[]),
    Meta::new("decr", &[], &[one(1, RW | ACCESS | UPDATE)]),
    Meta::new("decrby", &[], &[one(1, RW | ACCESS | UPDATE)]),
    Meta::new("del", &["request_policy:multi_shard", "response_policy:agg_sum"], &[ks(RM | DELETE, Begin::Index(1), Find::Range(-1, 1, 0))]),
    Meta::new("dump", &["nondeterministic_output"], &[one(1, RO | ACCESS)]),
    Meta::new("eval", &[], &[ks(RW | ACCESS | UPDATE, Begin::Index(2), Find::Keynum(0, 1, 1)).note("We cannot tell how the keys will be used so we assume the worst, RW and UPDATE")]),
    Meta::new("eval_ro", &[], &[ks(RO | ACCESS, Begin::Index(2), Find::Keynum(0, 1, 1)).note("We cannot tell how the keys will be used so we assume the worst, RO and ACCESS")]),
    Meta::new("evalsha", &[], &[ks(RW | ACCESS | UPDATE, Begin::Index(2), Find::Keynum(0, 1, 1))]),
    Meta::new("evalsha_ro", &[], &[ks(RO | ACCESS, Begin::Index(2), Find::Keynum(0, 1, 1))]),
    Meta::new("exists", &["request_policy:multi_shard", "response_policy:agg_sum"], &[ks(RO, Begin::Index(1), Find::Range(-1, 1, 0))]),
    Meta::new("expire", &[], &[one(1, RW | UPDATE)]),
    Meta::new("expireat", &[], &[one(1, RW | UPDATE)]),
    Meta::new("expiretime", &[], &[one(1, RO | ACCESS)]),
    Meta::new("fcall", &[], &[ks(RW | ACCESS | UPDATE, Begin::Index(2), Find::Keynum(0, 1, 1)).note("We cannot tell how the keys will be used so we assume the worst, RW and UPDATE")]),
    Meta::new("fcall_ro", &[], &[ks(RO | ACCESS, Begin::Index(2), Find::Keynum(0, 1, 1)).note("We cannot tell how the keys will be used so we assume the worst, RO and ACCESS")]),
    Meta::new("flushall", &["request_policy:all_shards", "response_policy:all_succeeded"], &[]),
    Meta::new("flushdb", &["request_policy:all_shards", "response_policy:all_succeeded"], &[]),
    Meta::new("function|delete", &["request_policy:all_shards", "response_policy:all_succeeded"], &[]),
    Meta::new("function|flush", &["request_policy:all_shards", "response_policy:all_succeeded"], &[]),
    Meta::new("function|kill", &["request_policy:all_shards", "response_policy:one_succeeded"], &[]),
    Meta::new("function|list", &["nondeterministic_output_order"], &[]),
    Meta::new("function|load", &["request_policy:all_shards", "response_policy:all_succeeded"], &[]),
    Meta::new("function|restore", &["request_policy:all_shards", "response_policy:all_succeeded"], &[]),
    Meta::new("function|stats", &["nondeterministic_output", "request_policy:all_shards", "response_policy:special"], &[]),
    Meta::new("geoadd", &[], &[one(1, RW | UPDATE)]),
    Meta::new("geodist", &[], &[one(1, RO | ACCESS)]),
    Meta::new("geohash", &[], &[one(1, RO | ACCESS)]),
    Meta::new("geopos", &[], &[one(1, RO | ACCESS)]),
    Meta::new("georadius", &[], &[one(1, RO | ACCESS), ks(OW | UPDATE, Begin::Keyword("STORE", 6), Find::Range(0, 1, 0)), ks(OW | UPDATE, Begin::Keyword("STOREDIST", 6), Find::Range(0, 1, 0))]),
    Meta::new("georadius_ro", &[], &[one(1, RO | ACCESS)]),
    Meta::new("georadiusbymember", &[], &[one(1, RO | ACCESS), ks(OW | UPDATE, Begin::Keyword("STORE", 5), Find::Range(0, 1, 0)), ks(OW | UPDATE, Begin::Keyword("STOREDIST", 5), Find::Range(0, 1, 0))]),
    Meta::new("georadiusbymember_ro", &[], &[one(1, RO | ACCESS)]),
    Meta::new("geosearch", &[], &[one(1, RO | ACCESS)]),
    Meta::new("geosearchstore", &[], &[one(1, OW | UPDATE), one(2, RO | ACCESS)]),
    Meta::new("get", &[], &[one(1, RO | ACCESS)]),
    Meta::new("getbit", &[], &[one(1, RO | ACCESS)]),
    Meta::new("getdel", &[], &[one(1, RW | ACCESS | DELETE)]),
    Meta::new("getex", &[], &[one(1, RW | ACCESS | UPDATE).note("RW and UPDATE because it changes the TTL")]),
    Meta::new("getrange", &[], &[one(1, RO | ACCESS)]),
    Meta::new("getset", &[], &[one(1, RW | ACCESS | UPDATE)]),
    Meta::new("hdel", &[], &[one(1, RW | DELETE)]),
    Meta::new("hexists", &[], &[one(1, RO)]),
    Meta::new("hget", &[], &[one(1, RO | ACCESS)]),
    Meta::new("hgetall", &["nondeterministic_output_order"], &[one(1, RO | ACCESS)]),
    Meta::new("hincrby", &[], &[one(1, RW | ACCESS | UPDATE)]),
    Meta::new("hincrbyfloat", &[], &[one(1, RW | ACCESS | UPDATE)]),
    Meta::new("hkeys", &["nondeterministic_output_order"], &[one(1, RO | ACCESS)]),
    Meta::new("hlen", &[], &[one(1, RO)]),
    Meta::new("hmget", &[], &[one(1, RO | ACCESS)]),
    Meta::new("hmset", &[], &[one(1, RW | UPDATE)]),
    Meta::new("hrandfield", &["nondeterministic_output"], &[one(1, RO | ACCESS)]),
    Meta::new("hscan", &["nondeterministic_output"], &[one(1, RO | ACCESS)]),
    Meta::new("hset", &[], &[one(1, RW | UPDATE)]),
    Meta::new("hsetnx", &[], &[one(1, RW | INSERT)]),
    Meta::new("hstrlen", &[], &[one(1, RO)]),
    Meta::new("hvals", &["nondeterministic_output_order"], &[one(1, RO | ACCESS)]),
    Meta::new("incr", &[], &[one(1, RW | ACCESS | UPDATE)]),
    Meta::new("incrby", &[], &[one(1, RW | ACCESS | UPDATE)]),
    Meta::new("incrbyfloat", &[], &[one(1, RW | ACCESS | UPDATE)]),
    Meta::new("info", &["nondeterministic_output", "request_policy:all_shards", "response_policy:special"], &[]),
    Meta::new("keys", &["request_policy:all_shards", "nondeterministic_output_order"], &[]),
    Meta::new("lastsave", &["nondeterministic_output"], &[]),
    Meta::new("latency|doctor", &["nondeterministic_output", "request_policy:all_nodes", "response_policy:special"], &[]),
    Meta::new("latency|graph", &["nondeterministic_output", "request_policy:all_nodes", "response_policy:special"], &[]),
    Meta::new("latency|histogram", &["nondeterministic_output", "request_policy:all_nodes", "response_policy:special"], &[]),
    Meta::new("latency|history", &["nondeterministic_output", "request_policy:all_nodes", "response_policy:special"], &[]),
    Meta::new("latency|latest", &["nondeterministic_output", "request_policy:all_nodes", "response_policy:special"], &[]),
    Meta::new("latency|reset", &["request_policy:all_nodes", "response_policy:all_succeeded"], &[]),
    Meta::new("lcs", &[], &[ks(RO | ACCESS, Begin::Index(1), Find::Range(1, 1, 0))]),
    Meta::new("lindex", &[], &[one(1, RO | ACCESS)]),
    Meta::new("linsert", &[], &[one(1, RW | INSERT)]),
    Meta::new("llen", &[], &[one(1, RO)]),
    Meta::new("lmove", &[], &[one(1, RW | ACCESS | DELETE), one(2, RW | INSERT)]),
    Meta::new("lmpop", &[], &[ks(RW | ACCESS | DELETE, Begin::Index(1), Find::Keynum(0, 1, 1))]),
    Meta::new("lpop", &[], &[one(1, RW | ACCESS | DELETE)]),
    Meta::new("lpos", &[], &[one(1, RO | ACCESS)]),
    Meta::new("lpush", &[], &[one(1, RW | INSERT)]),
    Meta::new("lpushx", &[], &[one(1, RW | INSERT)]),
    Meta::new("lrange", &[], &[one(1, RO | ACCESS)]),
    Meta::new("lrem", &[], &[one(1, RW | DELETE)]),
    Meta::new("lset", &[], &[one(1, RW | UPDATE)]),
    Meta::new("ltrim", &[], &[one(1, RW | DELETE)]),
    Meta::new("memory|doctor", &["nondeterministic_output", "request_policy:all_shards", "response_policy:special"], &[]),
    Meta::new("memory|malloc-stats", &["nondeterministic_output", "request_policy:all_shards", "response_policy:special"], &[]),
    Meta::new("memory|purge", &["request_policy:all_shards", "response_policy:all_succeeded"], &[]),
    Meta::new("memory|stats", &["nondeterministic_output", "request_policy:all_shards", "response_policy:special"], &[]),
    Meta::new("memory|usage", &[], &[one(2, RO)]),
    Meta::new("mget", &["request_policy:multi_shard"], &[ks(RO | ACCESS, Begin::Index(1), Find::Range(-1, 1, 0))]),
    Meta::new("migrate", &["nondeterministic_output"], &[one(3, RW | ACCESS | DELETE), ks(RW | ACCESS | DELETE | INCOMPLETE, Begin::Keyword("KEYS", -2), Find::Range(-1, 1, 0))]),
    Meta::new("module|list", &["nondeterministic_output_order"], &[]),
    Meta::new("move", &[], &[one(1, RW | ACCESS | UPDATE)]),
    Meta::new("mset", &["request_policy:multi_shard", "response_policy:all_succeeded"], &[ks(OW | UPDATE, Begin::Index(1), Find::Range(-1, 2, 0))]),
    Meta::new("msetnx", &["request_policy:multi_shard", "response_policy:agg_min"], &[ks(OW | INSERT, Begin::Index(1), Find::Range(-1, 2, 0))]),
    Meta::new("object|encoding", &["nondeterministic_output"], &[one(2, RO)]),
    Meta::new("object|freq", &["nondeterministic_output"], &[one(2, RO)]),
    Meta::new("object|idletime", &["nondeterministic_output"], &[one(2, RO)]),
    Meta::new("object|refcount", &["nondeterministic_output"], &[one(2, RO)]),
    Meta::new("persist", &[], &[one(1, RW | UPDATE)]),
    Meta::new("pexpire", &[], &[one(1, RW | UPDATE)]),
    Meta::new("pexpireat", &[], &[one(1, RW | UPDATE)]),
    Meta::new("pexpiretime", &[], &[one(1, RO | ACCESS)]),
    Meta::new("pfadd", &[], &[one(1, RW | INSERT)]),
    Meta::new("pfcount", &[], &[ks(RW | ACCESS, Begin::Index(1), Find::Range(-1, 1, 0)).note("RW because it may change the internal representation of the key, and propagate to replicas")]),
    Meta::new("pfdebug", &[], &[one(2, RW | ACCESS)]),
    Meta::new("pfmerge", &[], &[one(1, RW | ACCESS | INSERT), ks(RO | ACCESS, Begin::Index(2), Find::Range(-1, 1, 0))]),
    Meta::new("ping", &["request_policy:all_shards", "response_policy:all_succeeded"], &[]),
    Meta::new("psetex", &[], &[one(1, OW | UPDATE)]),
    Meta::new("pttl", &["nondeterministic_output"], &[one(1, RO | ACCESS)]),
    Meta::new("randomkey", &["request_policy:all_shards", "nondeterministic_output"], &[]),
    Meta::new("rename", &[], &[one(1, RW | ACCESS | DELETE), one(2, OW | UPDATE)]),
    Meta::new("renamenx", &[], &[one(1, RW | ACCESS | DELETE), one(2, OW | INSERT)]),
    Meta::new("restore", &[], &[one(1, OW | UPDATE)]),
    Meta::new("restore-asking", &[], &[one(1, OW | UPDATE)]),
    Meta::new("rpop", &[], &[one(1, RW | ACCESS | DELETE)]),
    Meta::new("rpoplpush", &[], &[one(1, RW | ACCESS | DELETE), one(2, RW | INSERT)]),
    Meta::new("rpush", &[], &[one(1, RW | INSERT)]),
    Meta::new("rpushx", &[], &[one(1, RW | INSERT)]),
    Meta::new("sadd", &[], &[one(1, RW | INSERT)]),
    Meta::new("scan", &["nondeterministic_output", "request_policy:special"], &[]),
    Meta::new("scard", &[], &[one(1, RO)]),
    Meta::new("script|exists", &["request_policy:all_shards", "response_policy:agg_logical_and"], &[]),
    Meta::new("script|flush", &["request_policy:all_nodes", "response_policy:all_succeeded"], &[]),
    Meta::new("script|kill", &["request_policy:all_shards", "response_policy:one_succeeded"], &[]),
    Meta::new("script|load", &["request_policy:all_nodes", "response_policy:all_succeeded"], &[]),
    Meta::new("sdiff", &["nondeterministic_output_order"], &[ks(RO | ACCESS, Begin::Index(1), Find::Range(-1, 1, 0))]),
    Meta::new("sdiffstore", &[], &[one(1, OW | UPDATE), ks(RO | ACCESS, Begin::Index(2), Find::Range(-1, 1, 0))]),
    Meta::new("set", &[], &[one(1, RW | ACCESS | UPDATE | VARIABLE_FLAGS).note("RW and ACCESS due to the optional `GET` argument")]),
    Meta::new("setbit", &[], &[one(1, RW | ACCESS | UPDATE)]),
    Meta::new("setex", &[], &[one(1, OW | UPDATE)]),
    Meta::new("setnx", &[], &[one(1, OW | INSERT)]),
    Meta::new("setrange", &[], &[one(1, RW | UPDATE)]),
    Meta::new("sinter", &["nondeterministic_output_order"], &[ks(RO | ACCESS, Begin::Index(1), Find::Range(-1, 1, 0))]),
    Meta::new("sintercard", &[], &[ks(RO | ACCESS, Begin::Index(1), Find::Keynum(0, 1, 1))]),
    Meta::new("sinterstore", &[], &[one(1, RW | UPDATE), ks(RO | ACCESS, Begin::Index(2), Find::Range(-1, 1, 0))]),
    Meta::new("sismember", &[], &[one(1, RO)]),
    Meta::new("slowlog|get", &["request_policy:all_nodes", "nondeterministic_output"], &[]),
    Meta::new("slowlog|len", &["request_policy:all_nodes", "response_policy:agg_sum", "nondeterministic_output"], &[]),
    Meta::new("slowlog|reset", &["request_policy:all_nodes", "response_policy:all_succeeded"], &[]),
    Meta::new("smembers", &["nondeterministic_output_order"], &[one(1, RO | ACCESS)]),
    Meta::new("smismember", &[], &[one(1, RO | ACCESS)]),
    Meta::new("smove", &[], &[one(1, RW | ACCESS | DELETE), one(2, RW | INSERT)]),
    Meta::new("sort", &[], &[one(1, RO | ACCESS), ks(RO | ACCESS, Begin::Unknown, Find::Unknown).note("For the optional BY/GET keyword. It is marked 'unknown' because the key names derive from the content of the key we sort"), ks(OW | UPDATE, Begin::Unknown, Find::Unknown).note("For the optional STORE keyword. It is marked 'unknown' because the keyword can appear anywhere in the argument array")]),
    Meta::new("sort_ro", &[], &[one(1, RO | ACCESS), ks(RO | ACCESS, Begin::Unknown, Find::Unknown).note("For the optional BY/GET keyword. It is marked 'unknown' because the key names derive from the content of the key we sort")]),
    Meta::new("spop", &["nondeterministic_output"], &[one(1, RW | ACCESS | DELETE)]),
    Meta::new("spublish", &[], &[one(1, NOT_KEY)]),
    Meta::new("srandmember", &["nondeterministic_output"], &[one(1, RO | ACCESS)]),
    Meta::new("srem", &[], &[one(1, RW | DELETE)]),
    Meta::new("sscan", &["nondeterministic_output"], &[one(1, RO | ACCESS)]),
    Meta::new("ssubscribe", &[], &[ks(NOT_KEY, Begin::Index(1), Find::Range(-1, 1, 0))]),
    Meta::new("strlen", &[], &[one(1, RO)]),
    Meta::new("substr", &[], &[one(1, RO | ACCESS)]),
    Meta::new("sunion", &["nondeterministic_output_order"], &[ks(RO | ACCESS, Begin::Index(1), Find::Range(-1, 1, 0))]),
    Meta::new("sunionstore", &[], &[one(1, OW | UPDATE), ks(RO | ACCESS, Begin::Index(2), Find::Range(-1, 1, 0))]),
    Meta::new("sunsubscribe", &[], &[ks(NOT_KEY, Begin::Index(1), Find::Range(-1, 1, 0))]),
    Meta::new("time", &["nondeterministic_output"], &[]),
    Meta::new("touch", &["request_policy:multi_shard", "response_policy:agg_sum"], &[ks(RO, Begin::Index(1), Find::Range(-1, 1, 0))]),
    Meta::new("ttl", &["nondeterministic_output"], &[one(1, RO | ACCESS)]),
    Meta::new("type", &[], &[one(1, RO)]),
    Meta::new("unlink", &["request_policy:multi_shard", "response_policy:agg_sum"], &[ks(RM | DELETE, Begin::Index(1), Find::Range(-1, 1, 0))]),
    Meta::new("wait", &["request_policy:all_shards", "response_policy:agg_min"], &[]),
    Meta::new("watch", &[], &[ks(RO, Begin::Index(1), Find::Range(-1, 1, 0))]),
    Meta::new("xack", &[], &[one(1, RW | UPDATE)]),
    Meta::new("xadd", &["nondeterministic_output"], &[one(1, RW | UPDATE).note("UPDATE instead of INSERT because of the optional trimming feature")]),
    Meta::new("xautoclaim", &["nondeterministic_output"], &[one(1, RW | DELETE)]),
    Meta::new("xclaim", &["nondeterministic_output"], &[one(1, RW | UPDATE)]),
    Meta::new("xdel", &[], &[one(1, RW | DELETE)]),
    Meta::new("xgroup|create", &[], &[one(2, RW | INSERT)]),
    Meta::new("xgroup|createconsumer", &[], &[one(2, RW | INSERT)]),
    Meta::new("xgroup|delconsumer", &[], &[one(2, RW | DELETE)]),
    Meta::new("xgroup|destroy", &[], &[one(2, RW | DELETE)]),
    Meta::new("xgroup|setid", &[], &[one(2, RW | UPDATE)]),
    Meta::new("xinfo|consumers", &["nondeterministic_output"], &[one(2, RO | ACCESS)]),
    Meta::new("xinfo|groups", &[], &[one(2, RO | ACCESS)]),
    Meta::new("xinfo|stream", &[], &[one(2, RO | ACCESS)]),
    Meta::new("xlen", &[], &[one(1, RO)]),
    Meta::new("xpending", &["nondeterministic_output"], &[one(1, RO | ACCESS)]),
    Meta::new("xrange", &[], &[one(1, RO | ACCESS)]),
    Meta::new("xread", &[], &[ks(RO | ACCESS, Begin::Keyword("STREAMS", 1), Find::Range(-1, 1, 2))]),
    Meta::new("xreadgroup", &[], &[ks(RO | ACCESS, Begin::Keyword("STREAMS", 4), Find::Range(-1, 1, 2))]),
    Meta::new("xrevrange", &[], &[one(1, RO | ACCESS)]),
    Meta::new("xsetid", &[], &[one(1, RW | UPDATE)]),
    Meta::new("xtrim", &["nondeterministic_output"], &[one(1, RW | DELETE)]),
    Meta::new("zadd", &[], &[one(1, RW | UPDATE)]),
    Meta::new("zcard", &[], &[one(1, RO)]),
    Meta::new("zcount", &[], &[one(1, RO | ACCESS)]),
    Meta::new("zdiff", &[], &[ks(RO | ACCESS, Begin::Index(1), Find::Keynum(0, 1, 1))]),
    Meta::new("zdiffstore", &[], &[one(1, OW | UPDATE), ks(RO | ACCESS, Begin::Index(2), Find::Keynum(0, 1, 1))]),
    Meta::new("zincrby", &[], &[one(1, RW | ACCESS | UPDATE)]),
    Meta::new("zinter", &[], &[ks(RO | ACCESS, Begin::Index(1), Find::Keynum(0, 1, 1))]),
    Meta::new("zintercard", &[], &[ks(RO | ACCESS, Begin::Index(1), Find::Keynum(0, 1, 1))]),
    Meta::new("zinterstore", &[], &[one(1, OW | UPDATE), ks(RO | ACCESS, Begin::Index(2), Find::Keynum(0, 1, 1))]),
    Meta::new("zlexcount", &[], &[one(1, RO | ACCESS)]),
    Meta::new("zmpop", &[], &[ks(RW | ACCESS | DELETE, Begin::Index(1), Find::Keynum(0, 1, 1))]),
    Meta::new("zmscore", &[], &[one(1, RO | ACCESS)]),
    Meta::new("zpopmax", &[], &[one(1, RW | ACCESS | DELETE)]),
    Meta::new("zpopmin", &[], &[one(1, RW | ACCESS | DELETE)]),
    Meta::new("zrandmember", &["nondeterministic_output"], &[one(1, RO | ACCESS)]),
    Meta::new("zrange", &[], &[one(1, RO | ACCESS)]),
    Meta::new("zrangebylex", &[], &[one(1, RO | ACCESS)]),
    Meta::new("zrangebyscore", &[], &[one(1, RO | ACCESS)]),
    Meta::new("zrangestore", &[], &[one(1, OW | UPDATE), one(2, RO | ACCESS)]),
    Meta::new("zrank", &[], &[one(1, RO | ACCESS)]),
    Meta::new("zrem", &[], &[one(1, RW | DELETE)]),
    Meta::new("zremrangebylex", &[], &[one(1, RW | DELETE)]),
    Meta::new("zremrangebyrank", &[], &[one(1, RW | DELETE)]),
    Meta::new("zremrangebyscore", &[], &[one(1, RW | DELETE)]),
    Meta::new("zrevrange", &[], &[one(1, RO | ACCESS)]),
    Meta::new("zrevrangebylex", &[], &[one(1, RO | ACCESS)]),
    Meta::new("zrevrangebyscore", &[], &[one(1, RO | ACCESS)]),
    Meta::new("zrevrank", &[], &[one(1, RO | ACCESS)]),
    Meta::new("zscan", &["nondeterministic_output"], &[one(1, RO | ACCESS)]),
    Meta::new("zscore", &[], &[one(1, RO | ACCESS)]),
    Meta::new("zunion", &[], &[ks(RO | ACCESS, Begin::Index(1), Find::Keynum(0, 1, 1))]),
    Meta::new("zunionstore", &[], &[one(1, OW | UPDATE), ks(RO | ACCESS, Begin::Index(2), Find::Keynum(0, 1, 1))]),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_sorted_and_unique() {
        for w in META.windows(2) {
            assert!(w[0].name < w[1].name, "{} before {}", w[0].name, w[1].name);
        }
        assert!(lookup("zunionstore").is_some());
        assert!(lookup("echo").is_none() && lookup("ping").is_some());
    }

    #[test]
    fn atoi_reads_as_c() {
        assert_eq!(c_atoi(b" 2abc"), 2);
        assert_eq!(c_atoi(b"-3"), -3);
        assert_eq!(c_atoi(b"x"), 0);
        assert_eq!(c_atoi(b"99999999999999999999999"), -1);
    }
}
