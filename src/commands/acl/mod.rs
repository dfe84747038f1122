//! Access control as Redis 7.0's ACL: command categories (as data on each command-table
//! entry, plus the ones Redis implies from flags), users with their passwords and
//! selectors, the rules `ACL SETUSER` understands, the permission check every command
//! passes, the ACL log, and the file forms (`user` lines, `aclfile`).
//!
//! The check costs one indexed load for a user allowed everything (the `default` user
//! out of the box): `User::unrestricted` is recomputed whenever a user changes.

pub mod command;

use super::{CommandSpec, CommandTable};
use std::collections::{BTreeMap, HashMap};

// Category bits, in Redis's order (COMMAND INFO and ACL CAT list them in this order).
pub const KEYSPACE: u32 = 1 << 0;
pub const READ: u32 = 1 << 1;
pub const WRITE: u32 = 1 << 2;
pub const SET: u32 = 1 << 3;
pub const SORTEDSET: u32 = 1 << 4;
pub const LIST: u32 = 1 << 5;
pub const HASH: u32 = 1 << 6;
pub const STRING: u32 = 1 << 7;
pub const BITMAP: u32 = 1 << 8;
pub const HYPERLOGLOG: u32 = 1 << 9;
pub const GEO: u32 = 1 << 10;
pub const STREAM: u32 = 1 << 11;
pub const PUBSUB: u32 = 1 << 12;
pub const ADMIN: u32 = 1 << 13;
pub const FAST: u32 = 1 << 14;
pub const SLOW: u32 = 1 << 15;
pub const BLOCKING: u32 = 1 << 16;
pub const DANGEROUS: u32 = 1 << 17;
pub const CONNECTION: u32 = 1 << 18;
pub const TRANSACTION: u32 = 1 << 19;
pub const SCRIPTING: u32 = 1 << 20;

pub const CATEGORY_NAMES: [(&str, u32); 21] = [
    ("keyspace", KEYSPACE),
    ("read", READ),
    ("write", WRITE),
    ("set", SET),
    ("sortedset", SORTEDSET),
    ("list", LIST),
    ("hash", HASH),
    ("string", STRING),
    ("bitmap", BITMAP),
    ("hyperloglog", HYPERLOGLOG),
    ("geo", GEO),
    ("stream", STREAM),
    ("pubsub", PUBSUB),
    ("admin", ADMIN),
    ("fast", FAST),
    ("slow", SLOW),
    ("blocking", BLOCKING),
    ("dangerous", DANGEROUS),
    ("connection", CONNECTION),
    ("transaction", TRANSACTION),
    ("scripting", SCRIPTING),
];

const fn str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// The categories Redis's command files declare for most commands of a group: the data
/// type's, `@keyspace` for generic key commands, and the connection / transaction /
/// scripting ones. Commands that declare otherwise say so with `CommandSpec::acl`.
pub const fn group_categories(group: &str) -> u32 {
    let table: [(&str, u32); 13] = [
        ("generic", KEYSPACE),
        ("string", STRING),
        ("list", LIST),
        ("set", SET),
        ("sorted-set", SORTEDSET),
        ("hash", HASH),
        ("bitmap", BITMAP),
        ("hyperloglog", HYPERLOGLOG),
        ("geo", GEO),
        ("stream", STREAM),
        ("connection", CONNECTION),
        ("transactions", TRANSACTION),
        ("scripting", SCRIPTING),
    ];
    let mut i = 0;
    while i < table.len() {
        if str_eq(table[i].0, group) {
            return table[i].1;
        }
        i += 1;
    }
    0
}

/// A command's categories: the declared ones plus those Redis's setImplicitACLCategories
/// adds from its flags (a scripting command is never `@read`; not `@fast` is `@slow`).
pub fn categories(spec: &CommandSpec) -> u32 {
    use super::{ADMIN as F_ADMIN, BLOCKING as F_BLOCKING, FAST as F_FAST};
    use super::{PUBSUB as F_PUBSUB, READONLY as F_READONLY, WRITE as F_WRITE};
    let f = spec.flags;
    let mut c = spec.acl;
    if f & F_WRITE != 0 {
        c |= WRITE;
    }
    if f & F_READONLY != 0 && c & SCRIPTING == 0 {
        c |= READ;
    }
    if f & F_ADMIN != 0 {
        c |= ADMIN | DANGEROUS;
    }
    if f & F_PUBSUB != 0 {
        c |= PUBSUB;
    }
    if f & F_FAST != 0 {
        c |= FAST;
    }
    if f & F_BLOCKING != 0 {
        c |= BLOCKING;
    }
    if c & FAST == 0 {
        c |= SLOW;
    }
    c
}

/// `@name` of every category in `bits`, in Redis's order.
pub fn category_names(bits: u32) -> impl Iterator<Item = &'static str> {
    CATEGORY_NAMES
        .iter()
        .filter(move |(_, b)| bits & b != 0)
        .map(|(n, _)| *n)
}

pub fn category_by_name(name: &[u8]) -> Option<u32> {
    CATEGORY_NAMES
        .iter()
        .find(|(n, _)| n.as_bytes().eq_ignore_ascii_case(name))
        .map(|(_, b)| *b)
}

/// One command or subcommand as the ACL sees it (Redis's original table: renames do not
/// change what rules name).
pub struct AclCommand {
    pub spec: &'static CommandSpec,
    pub full_name: String,
    pub categories: u32,
    pub subs: Vec<u16>,
    pub parent: Option<u16>,
    /// What its keys need (decided once from its name and flags, not per command run).
    key_rule: KeyRule,
    /// Its keys come from its arguments (numkeys, keywords): `propagate::keys_of`.
    key_proc: bool,
    channel_rule: ChannelRule,
}

/// Why a command was refused (Redis's ACL_DENIED_*; the order is the one Redis uses to
/// pick which of several selectors' refusals to report).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Denied {
    Command = 1,
    Key = 2,
    Auth = 3,
    Channel = 4,
}

/// Where a refusal happened (ACL LOG's `context`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogContext {
    Toplevel,
    Multi,
    Lua,
}

const PERM_READ: u8 = 1;
const PERM_WRITE: u8 = 2;
const PERM_ALL: u8 = 3;

#[derive(Clone, Debug, PartialEq, Eq)]
struct KeyPattern {
    perm: u8,
    pattern: Vec<u8>,
    /// How the pattern is matched, decided once from its text (the check runs on every
    /// key of every command of a restricted user).
    matcher: Matcher,
    /// A prefix of at most 8 bytes as a little-endian word (zero-padded), and the mask
    /// of its bytes in a key's first 8.
    prefix_word: u64,
    prefix_mask: u64,
}

/// The cheapest way to match a key pattern with the same outcome as the glob.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Matcher {
    /// No glob character: the key equals the pattern.
    Exact,
    /// Literal characters then only `*`s (`key:*`): the key starts with the first
    /// `usize` bytes (any non-empty key when there are none).
    Prefix(usize),
    /// Anything else: `util::glob_match`.
    Glob,
}

impl Matcher {
    fn of(pattern: &[u8]) -> Matcher {
        let special = |c: &u8| matches!(c, b'*' | b'?' | b'[' | b'\\');
        let Some(first) = pattern.iter().position(special) else {
            return Matcher::Exact;
        };
        if pattern[first..].iter().all(|&c| c == b'*') {
            Matcher::Prefix(first)
        } else {
            Matcher::Glob
        }
    }
}

impl KeyPattern {
    fn new(perm: u8, pattern: &[u8]) -> KeyPattern {
        let matcher = Matcher::of(pattern);
        let mut word = [0u8; 8];
        let mut mask = 0;
        if let Matcher::Prefix(n) = matcher {
            if (1..=8).contains(&n) {
                word[..n].copy_from_slice(&pattern[..n]);
                mask = u64::MAX >> (64 - 8 * n as u32);
            }
        }
        KeyPattern {
            perm,
            pattern: pattern.to_vec(),
            matcher,
            prefix_word: u64::from_le_bytes(word),
            prefix_mask: mask,
        }
    }

    #[inline]
    fn matches(&self, key: &[u8]) -> bool {
        match self.matcher {
            Matcher::Exact => self.pattern.as_slice() == key,
            // The glob's `*` needs at least one byte when nothing comes before it.
            Matcher::Prefix(0) => !key.is_empty(),
            // Up to 8 bytes of prefix: one masked compare of the key's first 8 bytes.
            Matcher::Prefix(n) if n <= 8 && key.len() >= 8 => {
                let mut word = [0u8; 8];
                word.copy_from_slice(&key[..8]);
                u64::from_le_bytes(word) & self.prefix_mask == self.prefix_word
            }
            Matcher::Prefix(n) => key.starts_with(&self.pattern[..n]),
            Matcher::Glob => crate::util::glob_match(&self.pattern, key, false),
        }
    }
}

#[derive(Clone, Debug)]
struct Selector {
    root: bool,
    all_keys: bool,
    all_channels: bool,
    all_commands: bool,
    /// One bit per command id; the last bit (`future_bit`) is set only by `+@all`, so a
    /// description knows to start from `+@all`.
    allowed: Vec<u64>,
    /// Command id → first arguments allowed although the command is not.
    first_args: Vec<(u16, Vec<Vec<u8>>)>,
    patterns: Vec<KeyPattern>,
    channels: Vec<Vec<u8>>,
}

/// Why a rule was refused (Redis's errno cases in ACLSetUser).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuleError {
    UnknownCommand,
    Syntax,
    KeyAfterAll,
    ChannelAfterAll,
    NoSuchPassword,
    BadHash,
    FirstArgOfSub,
}

impl RuleError {
    pub fn text(self) -> &'static str {
        match self {
            RuleError::UnknownCommand => "Unknown command or category name in ACL",
            RuleError::Syntax => "Syntax error",
            RuleError::KeyAfterAll => "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns",
            RuleError::ChannelAfterAll => "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels",
            RuleError::NoSuchPassword => "The password you are trying to remove from the user does not exist",
            RuleError::BadHash => "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters",
            RuleError::FirstArgOfSub => "Allowing first-arg of a subcommand is not supported",
        }
    }
}

#[derive(Clone, Debug)]
pub struct User {
    pub name: Vec<u8>,
    pub enabled: bool,
    pub nopass: bool,
    /// `Some(true)`: sanitize-payload, `Some(false)`: skip-sanitize-payload.
    sanitize: Option<bool>,
    /// SHA-256 of each password, lowercase hex (64 bytes).
    passwords: Vec<Vec<u8>>,
    selectors: Vec<Selector>,
    /// Allowed every command, key and channel: the permission check is skipped.
    pub unrestricted: bool,
    /// Per command id, what the root selector alone lets `check` answer (`FAST_*`),
    /// decided when the user changes (`Acl::finish`) rather than on every command.
    fast: Box<[u32]>,
    /// The root selector's key patterns as masked compares of a key's first 8 bytes,
    /// when every one of them is a prefix of at most 8 bytes then `*`s (`key:*`); empty
    /// otherwise (the one-key check then walks the patterns).
    prefixes: Box<[PrefixRule]>,
    /// `prefixes` split by the permission a command needs (index: `PERM_READ`,
    /// `PERM_WRITE`, `PERM_ALL`): the rules granting it, as (mask, word), so the usual
    /// check compares words only.
    prefix_words: [Box<[(u64, u64)]>; 4],
}

/// A `Matcher::Prefix` pattern of at most 8 bytes, for keys of at least 8 bytes.
#[derive(Clone, Copy, Debug)]
struct PrefixRule {
    mask: u64,
    word: u64,
    perm: u8,
}

/// `User::fast` entries: the kind in the low 2 bits. Slow: the general walk over every
/// selector decides.
const FAST_SLOW: u32 = 0;
/// The root selector allows the command, and it has no key or channel to look at (or the
/// selector allows every key).
const FAST_ALLOW: u32 = 1;
/// The root selector allows the command, which has exactly one key, at the argument
/// position in bits 8..16, needing the permission bits in bits 2..4 (write and read too
/// for SET with GET when bit 4 is set). A key the root's patterns refuse sends the check
/// to the general walk (another selector may allow it, and the walk names the position).
/// Bits 16..32: the most arguments (name included) `one_prefixed_key_allowed` decides for;
/// more go to `one_key_allowed`.
const FAST_ONE_KEY: u32 = 2;
const FAST_SET_RULE: u32 = 1 << 4;
const FAST_ANY_ARGS: u32 = 0xFFFF << 16;

/// SHA-256 of a password as 64 lowercase hex digits (Redis's stored form).
pub fn hash_password(pass: &[u8]) -> Vec<u8> {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(pass);
    let mut out = Vec::with_capacity(64);
    for b in digest {
        out.push(b"0123456789abcdef"[(b >> 4) as usize]);
        out.push(b"0123456789abcdef"[(b & 15) as usize]);
    }
    out
}

/// Compares two hashes without an early exit, so timing says nothing about where they
/// differ.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn valid_hash(h: &[u8]) -> bool {
    h.len() == 64
        && h.iter()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c))
}

/// Spaces (C's isspace) or NUL in a pattern or name.
pub fn has_spaces(s: &[u8]) -> bool {
    s.iter()
        .any(|&c| c == 0 || c == b' ' || (b'\t'..=b'\r').contains(&c))
}

/// An ACL log entry (Redis's ACLLogEntry).
#[derive(Clone, Debug)]
pub struct LogEntry {
    pub count: u64,
    pub reason: Denied,
    pub context: LogContext,
    pub object: Vec<u8>,
    pub username: Vec<u8>,
    pub ctime_ms: i64,
    pub client_info: String,
}

/// The server's users, the command table as rules name it, and the ACL log.
pub struct Acl {
    pub commands: Vec<AclCommand>,
    by_name: HashMap<String, u16>,
    /// A spec's address → its id (one multiply to hash: looked up on every restricted
    /// user's command).
    by_spec: HashMap<usize, u16, std::hash::BuildHasherDefault<super::executor::stats::AddrHasher>>,
    /// The same, direct-mapped by the address's multiplicative hash: one load and one
    /// compare for most commands; a command whose slot another took is in `by_spec` only.
    spec_slots: Box<[(usize, u16); SPEC_SLOTS]>,
    /// User slots; a client holds its user's slot. A deleted user's slot is emptied (its
    /// clients are disconnected) and not reused.
    slots: Vec<Option<User>>,
    names: BTreeMap<Vec<u8>, usize>,
    pub log: std::collections::VecDeque<LogEntry>,
    /// `acl-pubsub-default allchannels`: new selectors start with every channel.
    pub pubsub_default_all: bool,
}

/// The default user's slot.
pub const DEFAULT_USER: usize = 0;

/// Slots of `Acl::spec_slots` (a power of two, several times the number of commands and
/// subcommands, so few collide).
const SPEC_SLOTS: usize = 4096;

#[inline]
fn spec_slot(addr: usize) -> usize {
    ((addr as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - SPEC_SLOTS.trailing_zeros()))
        as usize
}

impl Acl {
    pub fn new(table: &CommandTable) -> Acl {
        let mut acl = Acl {
            commands: Vec::new(),
            by_name: HashMap::new(),
            by_spec: HashMap::default(),
            spec_slots: Box::new([(0, 0); SPEC_SLOTS]),
            slots: Vec::new(),
            names: BTreeMap::new(),
            log: Default::default(),
            pubsub_default_all: false,
        };
        for spec in table.all.iter() {
            let id = acl.add_command(spec, None);
            for sub in spec.subcommands {
                let sid = acl.add_command(sub, Some(id));
                acl.commands[id as usize].subs.push(sid);
            }
        }
        let mut default = acl.new_user(b"default");
        for op in ["+@all", "~*", "&*", "on", "nopass"] {
            let _ = acl.apply(&mut default, op.as_bytes());
        }
        acl.finish(&mut default);
        acl.slots.push(Some(default));
        acl.names.insert(b"default".to_vec(), DEFAULT_USER);
        acl
    }

    fn add_command(&mut self, spec: &'static CommandSpec, parent: Option<u16>) -> u16 {
        let id = self.commands.len() as u16;
        let full_name = match parent {
            Some(p) => format!("{}|{}", self.commands[p as usize].spec.name, spec.name),
            None => spec.name.to_string(),
        };
        self.by_name.insert(full_name.clone(), id);
        let addr = spec as *const CommandSpec as usize;
        self.by_spec.insert(addr, id);
        let slot = &mut self.spec_slots[spec_slot(addr)];
        if slot.0 == 0 {
            *slot = (addr, id);
        }
        self.commands.push(AclCommand {
            spec,
            full_name,
            categories: categories(spec),
            subs: Vec::new(),
            parent,
            key_rule: KeyRule::of(spec),
            key_proc: super::propagate::has_key_proc(spec.name),
            channel_rule: ChannelRule::of(spec),
        });
        id
    }

    fn words(&self) -> usize {
        (self.commands.len() + 1).div_ceil(64)
    }
    fn future_bit(&self) -> usize {
        self.commands.len()
    }

    fn new_selector(&self, root: bool) -> Selector {
        Selector {
            root,
            all_keys: false,
            all_channels: self.pubsub_default_all,
            all_commands: false,
            allowed: vec![0; self.words()],
            first_args: Vec::new(),
            patterns: Vec::new(),
            channels: Vec::new(),
        }
    }

    /// A user as ACLCreateUser makes it: off, no password, no permissions.
    pub fn new_user(&self, name: &[u8]) -> User {
        User {
            name: name.to_vec(),
            enabled: false,
            nopass: false,
            sanitize: None,
            passwords: Vec::new(),
            selectors: vec![self.new_selector(true)],
            unrestricted: false,
            fast: Box::default(),
            prefixes: Box::default(),
            prefix_words: Default::default(),
        }
    }

    pub fn user(&self, slot: usize) -> Option<&User> {
        self.slots.get(slot).and_then(|u| u.as_ref())
    }
    pub fn slot_of(&self, name: &[u8]) -> Option<usize> {
        self.names.get(name).copied()
    }
    pub fn user_by_name(&self, name: &[u8]) -> Option<&User> {
        self.slot_of(name).and_then(|s| self.user(s))
    }
    /// Users in name order (Redis's rax order).
    pub fn users(&self) -> impl Iterator<Item = &User> {
        self.names.values().filter_map(|&s| self.user(s))
    }

    /// Whether the user in `slot` may run anything (no check needed).
    #[inline]
    pub fn unrestricted(&self, slot: usize) -> bool {
        matches!(self.slots.get(slot), Some(Some(u)) if u.unrestricted)
    }

    /// The default user lets a new connection in without AUTH (nopass and on).
    pub fn default_needs_no_auth(&self) -> bool {
        self.user(DEFAULT_USER)
            .is_some_and(|u| u.nopass && u.enabled)
    }

    /// The default user has `nopass` (protected mode's "no password set").
    pub fn default_nopass(&self) -> bool {
        self.user(DEFAULT_USER).is_some_and(|u| u.nopass)
    }

    /// Checks `pass` for `name`: the user's slot, or None (unknown, disabled, or no
    /// password matched).
    pub fn authenticate(&self, name: &[u8], pass: &[u8]) -> Option<usize> {
        let slot = self.slot_of(name)?;
        let u = self.user(slot)?;
        if !u.enabled {
            return None;
        }
        if u.nopass {
            return Some(slot);
        }
        let hashed = hash_password(pass);
        // Every stored hash is compared, so the time does not say which one matched.
        let mut ok = false;
        for p in &u.passwords {
            ok |= constant_time_eq(&hashed, p);
        }
        ok.then_some(slot)
    }

    // --- rules ---------------------------------------------------------------------

    fn cmd_bit(sel: &Selector, id: usize) -> bool {
        sel.allowed
            .get(id / 64)
            .is_some_and(|w| w & (1 << (id % 64)) != 0)
    }
    fn set_cmd_bit(sel: &mut Selector, id: usize, on: bool) {
        if let Some(w) = sel.allowed.get_mut(id / 64) {
            if on {
                *w |= 1 << (id % 64);
            } else {
                *w &= !(1 << (id % 64));
                sel.all_commands = false;
            }
        }
    }
    /// Allows or denies a command and, for a container, all its subcommands.
    fn change_perm(&self, sel: &mut Selector, id: u16, allow: bool) {
        Self::set_cmd_bit(sel, id as usize, allow);
        sel.first_args.retain(|(i, _)| *i != id);
        for &s in &self.commands[id as usize].subs {
            Self::set_cmd_bit(sel, s as usize, allow);
        }
    }
    fn set_category(&self, sel: &mut Selector, cat: u32, allow: bool) {
        for id in 0..self.commands.len() {
            if self.commands[id].categories & cat != 0 {
                self.change_perm(sel, id as u16, allow);
            }
        }
    }

    fn lookup(&self, name: &[u8]) -> Option<u16> {
        let lower = String::from_utf8_lossy(name).to_ascii_lowercase();
        self.by_name.get(&lower).copied()
    }

    fn apply_selector(&self, sel: &mut Selector, op: &[u8]) -> Result<(), RuleError> {
        // An empty rule (`""` inside a selector) is no rule Redis knows.
        if op.is_empty() {
            return Err(RuleError::Syntax);
        }
        let is = |w: &str| op.eq_ignore_ascii_case(w.as_bytes());
        if is("allkeys") || op == b"~*" {
            sel.all_keys = true;
            sel.patterns.clear();
        } else if is("resetkeys") {
            sel.all_keys = false;
            sel.patterns.clear();
        } else if is("allchannels") || op == b"&*" {
            sel.all_channels = true;
            sel.channels.clear();
        } else if is("resetchannels") {
            sel.all_channels = false;
            sel.channels.clear();
        } else if is("allcommands") || is("+@all") {
            sel.allowed.iter_mut().for_each(|w| *w = u64::MAX);
            sel.all_commands = true;
            sel.first_args.clear();
        } else if is("nocommands") || is("-@all") {
            sel.allowed.iter_mut().for_each(|w| *w = 0);
            sel.all_commands = false;
            sel.first_args.clear();
        } else if op[0] == b'~' || op[0] == b'%' {
            if sel.all_keys {
                return Err(RuleError::KeyAfterAll);
            }
            let mut perm = 0u8;
            let mut offset = 1;
            if op[0] == b'%' {
                while let Some(&c) = op.get(offset) {
                    if c.eq_ignore_ascii_case(&b'R') && perm & PERM_READ == 0 {
                        perm |= PERM_READ;
                    } else if c.eq_ignore_ascii_case(&b'W') && perm & PERM_WRITE == 0 {
                        perm |= PERM_WRITE;
                    } else if c == b'~' {
                        offset += 1;
                        break;
                    } else {
                        return Err(RuleError::Syntax);
                    }
                    offset += 1;
                }
            } else {
                perm = PERM_ALL;
            }
            // `%` or `%~` grant nothing: refused, as redis-server 7.0.15 does.
            if perm == 0 {
                return Err(RuleError::Syntax);
            }
            let pattern = &op[offset.min(op.len())..];
            if has_spaces(pattern) {
                return Err(RuleError::Syntax);
            }
            match sel.patterns.iter_mut().find(|p| p.pattern == pattern) {
                Some(p) => p.perm |= perm,
                None => sel.patterns.push(KeyPattern::new(perm, pattern)),
            }
            sel.all_keys = false;
        } else if op[0] == b'&' {
            if sel.all_channels {
                return Err(RuleError::ChannelAfterAll);
            }
            if has_spaces(&op[1..]) {
                return Err(RuleError::Syntax);
            }
            if !sel.channels.iter().any(|c| c == &op[1..]) {
                sel.channels.push(op[1..].to_vec());
            }
            sel.all_channels = false;
        } else if op[0] == b'+' && op.get(1) != Some(&b'@') {
            let name = &op[1..];
            match name.iter().rposition(|&c| c == b'|') {
                None => {
                    let id = self.lookup(name).ok_or(RuleError::UnknownCommand)?;
                    self.change_perm(sel, id, true);
                }
                Some(bar) => {
                    let id = self.lookup(&name[..bar]).ok_or(RuleError::UnknownCommand)?;
                    if self.commands[id as usize].parent.is_some() {
                        return Err(RuleError::FirstArgOfSub);
                    }
                    let sub = &name[bar + 1..];
                    if sub.is_empty() {
                        return Err(RuleError::Syntax);
                    }
                    if !self.commands[id as usize].subs.is_empty() {
                        let sid = self.lookup(name).ok_or(RuleError::UnknownCommand)?;
                        self.change_perm(sel, sid, true);
                    } else {
                        crate::warning!("Deprecation warning: Allowing a first arg of an otherwise blocked command is a misuse of ACL and may get disabled in the future (offender: +{})", String::from_utf8_lossy(name));
                        match sel.first_args.iter_mut().find(|(i, _)| *i == id) {
                            Some((_, v)) => {
                                if !v.iter().any(|a| a.eq_ignore_ascii_case(sub)) {
                                    v.push(sub.to_vec());
                                }
                            }
                            None => sel.first_args.push((id, vec![sub.to_vec()])),
                        }
                    }
                }
            }
        } else if op[0] == b'-' && op.get(1) != Some(&b'@') {
            let id = self.lookup(&op[1..]).ok_or(RuleError::UnknownCommand)?;
            self.change_perm(sel, id, false);
        } else if (op[0] == b'+' || op[0] == b'-') && op.get(1) == Some(&b'@') {
            let cat = category_by_name(&op[2..]).ok_or(RuleError::UnknownCommand)?;
            self.set_category(sel, cat, op[0] == b'+');
        } else {
            return Err(RuleError::Syntax);
        }
        Ok(())
    }

    /// Applies one rule to `u` (Redis's ACLSetUser). `finish` must follow a series.
    pub fn apply(&self, u: &mut User, op: &[u8]) -> Result<(), RuleError> {
        if op.is_empty() {
            return Ok(());
        }
        let is = |w: &str| op.eq_ignore_ascii_case(w.as_bytes());
        if is("on") {
            u.enabled = true;
        } else if is("off") {
            u.enabled = false;
        } else if is("skip-sanitize-payload") {
            u.sanitize = Some(false);
        } else if is("sanitize-payload") {
            u.sanitize = Some(true);
        } else if is("nopass") {
            u.nopass = true;
            u.passwords.clear();
        } else if is("resetpass") {
            u.nopass = false;
            u.passwords.clear();
        } else if op[0] == b'>' || op[0] == b'#' {
            let hash = if op[0] == b'>' {
                hash_password(&op[1..])
            } else {
                if !valid_hash(&op[1..]) {
                    return Err(RuleError::BadHash);
                }
                op[1..].to_vec()
            };
            if !u.passwords.contains(&hash) {
                u.passwords.push(hash);
            }
            u.nopass = false;
        } else if op[0] == b'<' || op[0] == b'!' {
            let hash = if op[0] == b'<' {
                hash_password(&op[1..])
            } else {
                if !valid_hash(&op[1..]) {
                    return Err(RuleError::BadHash);
                }
                op[1..].to_vec()
            };
            let at = u
                .passwords
                .iter()
                .position(|p| *p == hash)
                .ok_or(RuleError::NoSuchPassword)?;
            u.passwords.remove(at);
        } else if op[0] == b'(' && op.last() == Some(&b')') {
            let mut sel = self.new_selector(false);
            let inner = &op[1..op.len() - 1];
            let (mut data, mut ranges) = (Vec::new(), Vec::new());
            // Redis creates the selector from sdssplitargs; unbalanced quotes leave no
            // operations, and an empty selector is still added.
            if crate::util::split_args(inner, &mut data, &mut ranges).is_ok() {
                for &(s, l) in &ranges {
                    self.apply_selector(&mut sel, &data[s..s + l])?;
                }
            }
            u.selectors.push(sel);
        } else if is("clearselectors") {
            u.selectors.truncate(1);
        } else if is("reset") {
            u.nopass = false;
            u.passwords.clear();
            let root = &mut u.selectors[0];
            root.all_keys = false;
            root.patterns.clear();
            root.all_channels = self.pubsub_default_all;
            root.channels.clear();
            u.enabled = false;
            u.sanitize = Some(true);
            u.selectors.truncate(1);
            let root = &mut u.selectors[0];
            root.allowed.iter_mut().for_each(|w| *w = 0);
            root.all_commands = false;
            root.first_args.clear();
        } else {
            self.apply_selector(&mut u.selectors[0], op)?;
        }
        Ok(())
    }

    /// Recomputes what the fast path reads.
    pub fn finish(&self, u: &mut User) {
        let r = &u.selectors[0];
        u.unrestricted = r.all_commands && r.all_keys && r.all_channels;
        u.fast = if u.unrestricted {
            Box::default()
        } else {
            (0..self.commands.len())
                .map(|id| self.fast_entry(r, id))
                .collect()
        };
        let prefixes: Vec<PrefixRule> = r
            .patterns
            .iter()
            .filter(|p| matches!(p.matcher, Matcher::Prefix(n) if n <= 8))
            .map(|p| PrefixRule {
                mask: p.prefix_mask,
                word: p.prefix_word,
                perm: p.perm,
            })
            .collect();
        u.prefixes = if prefixes.len() == r.patterns.len() {
            prefixes.into()
        } else {
            Box::default()
        };
        u.prefix_words = std::array::from_fn(|need| {
            u.prefixes
                .iter()
                .filter(|r| need != 0 && r.perm & need as u8 == need as u8)
                .map(|r| (r.mask, r.word))
                .collect()
        });
    }

    /// What `selector` lets the check answer for command `id` without the general walk
    /// (the same answer the walk gives when this selector allows it).
    fn fast_entry(&self, sel: &Selector, id: usize) -> u32 {
        let cmd = &self.commands[id];
        if !(sel.all_commands || Self::cmd_bit(sel, id))
            || cmd.key_proc
            || (cmd.channel_rule != ChannelRule::None && !sel.all_channels)
        {
            return FAST_SLOW;
        }
        let spec = cmd.spec;
        if sel.all_keys || cmd.key_rule == KeyRule::NoKeys || spec.first_key <= 0 {
            return FAST_ALLOW;
        }
        // One key only: the last key is the first (a negative last counts from the end).
        if spec.last_key != spec.first_key || spec.first_key > 255 {
            return FAST_SLOW;
        }
        let entry = FAST_ONE_KEY | (spec.first_key as u32) << 8;
        match cmd.key_rule {
            KeyRule::All(need) => entry | (need as u32) << 2 | FAST_ANY_ARGS,
            // SET with more than its value may carry GET (read and write): decided by
            // `one_key_allowed`, which looks.
            KeyRule::Set => entry | (PERM_WRITE as u32) << 2 | FAST_SET_RULE | 3 << 16,
            _ => FAST_SLOW,
        }
    }

    /// Redis's ACLMergeSelectorArguments: a selector split over several arguments
    /// (`(~a` `+get)`) becomes one. Err: the argument where an unclosed one starts.
    pub fn merge_selectors(args: &[Vec<u8>]) -> Result<Vec<Vec<u8>>, usize> {
        let mut out = Vec::new();
        let mut open: Option<(usize, Vec<u8>)> = None;
        for (j, op) in args.iter().enumerate() {
            // An opening argument starts a selector even inside another (Redis drops the
            // unfinished one).
            if op.first() == Some(&b'(') && op.last() != Some(&b')') {
                open = Some((j, op.clone()));
                continue;
            }
            if let Some((_, sel)) = open.as_mut() {
                sel.push(b' ');
                sel.extend_from_slice(op);
                if op.last() == Some(&b')') {
                    out.push(open.take().unwrap().1);
                }
                continue;
            }
            out.push(op.clone());
        }
        match open {
            Some((j, _)) => Err(j),
            None => Ok(out),
        }
    }

    /// ACL SETUSER: applies `ops` to a copy of the user (or a new one) and installs it
    /// only if every rule is valid. Returns Redis's error text otherwise, and the slots
    /// of clients whose subscriptions the new channel rules revoke are not computed here
    /// (see `command::setuser`).
    pub fn set_user(&mut self, name: &[u8], ops: &[Vec<u8>]) -> Result<usize, String> {
        let merged = Self::merge_selectors(ops).map_err(|j| {
            format!(
                "Unmatched parenthesis in acl selector starting at '{}'.",
                String::from_utf8_lossy(&ops[j])
            )
        })?;
        let mut u = match self.user_by_name(name) {
            Some(u) => u.clone(),
            None => self.new_user(name),
        };
        for op in &merged {
            if let Err(e) = self.apply(&mut u, op) {
                return Err(format!(
                    "Error in ACL SETUSER modifier '{}': {}",
                    String::from_utf8_lossy(op),
                    e.text()
                ));
            }
        }
        self.finish(&mut u);
        Ok(self.install(u))
    }

    /// Puts `u` in its slot (a new one for a new name).
    pub fn install(&mut self, u: User) -> usize {
        match self.names.get(&u.name) {
            Some(&slot) => {
                self.slots[slot] = Some(u);
                slot
            }
            None => {
                let slot = self.slots.len();
                self.names.insert(u.name.clone(), slot);
                self.slots.push(Some(u));
                slot
            }
        }
    }

    /// Removes a user (not `default`); its slot stays empty.
    pub fn delete_user(&mut self, name: &[u8]) -> Option<usize> {
        if name == b"default" {
            return None;
        }
        let slot = self.names.remove(name)?;
        self.slots[slot] = None;
        Some(slot)
    }

    /// Replaces every user at once (ACL LOAD, startup): the default user keeps slot 0.
    /// Returns the slots of users that are gone or replaced (their clients go).
    pub fn replace_all(&mut self, users: Vec<User>) -> Vec<usize> {
        let mut gone: Vec<usize> = self
            .names
            .iter()
            .filter(|(n, _)| n.as_slice() != b"default")
            .map(|(_, &s)| s)
            .collect();
        for s in &gone {
            self.slots[*s] = None;
        }
        self.names.retain(|n, _| n.as_slice() == b"default");
        let mut have_default = false;
        for u in users {
            if u.name == b"default" {
                have_default = true;
                self.slots[DEFAULT_USER] = Some(u);
            } else {
                self.install(u);
            }
        }
        if !have_default {
            let mut d = self.new_user(b"default");
            for op in ["+@all", "~*", "&*", "on", "nopass"] {
                let _ = self.apply(&mut d, op.as_bytes());
            }
            self.finish(&mut d);
            self.slots[DEFAULT_USER] = Some(d);
        }
        gone.sort_unstable();
        gone
    }

    /// `requirepass`: the default user's only password (empty: nopass).
    pub fn set_default_password(&mut self, pass: Option<&[u8]>) {
        let Some(mut u) = self.user(DEFAULT_USER).cloned() else {
            return;
        };
        let _ = self.apply(&mut u, b"resetpass");
        match pass {
            Some(p) => {
                let mut op = b">".to_vec();
                op.extend_from_slice(p);
                let _ = self.apply(&mut u, &op);
            }
            None => {
                let _ = self.apply(&mut u, b"nopass");
            }
        }
        self.finish(&mut u);
        self.slots[DEFAULT_USER] = Some(u);
    }

    // --- descriptions ----------------------------------------------------------------

    fn count_category(&self, sel: &Selector, cat: u32) -> (usize, usize) {
        let (mut on, mut off) = (0, 0);
        for (id, c) in self.commands.iter().enumerate() {
            if c.categories & cat != 0 {
                if Self::cmd_bit(sel, id) {
                    on += 1;
                } else {
                    off += 1;
                }
            }
        }
        (on, off)
    }

    /// The command rules that rebuild the selector's bitmap (Redis's
    /// ACLDescribeSelectorCommandRules): `+@all` or `-@all`, the best-fitting categories,
    /// then single commands (in command-table order; Redis's order is its hash table's).
    fn describe_commands(&self, sel: &Selector) -> String {
        let mut rules = String::new();
        let mut fake = self.new_selector(false);
        let additive = !Self::cmd_bit(sel, self.future_bit());
        if additive {
            rules.push_str("-@all ");
            let _ = self.apply_selector(&mut fake, b"-@all");
        } else {
            rules.push_str("+@all ");
            let _ = self.apply_selector(&mut fake, b"+@all");
        }
        let mut temp = self.new_selector(false);
        temp.allowed = sel.allowed.clone();
        let mut applied = [false; CATEGORY_NAMES.len()];
        loop {
            let mut best = None;
            let (mut mindiff, mut maxsame) = (usize::MAX, 0);
            for (j, (_, flag)) in CATEGORY_NAMES.iter().enumerate() {
                if applied[j] {
                    continue;
                }
                let (on, off) = self.count_category(&temp, *flag);
                let (diff, same) = if additive { (off, on) } else { (on, off) };
                if same > diff && (diff < mindiff || (diff == mindiff && same > maxsame)) {
                    best = Some(j);
                    mindiff = diff;
                    maxsame = same;
                }
            }
            let Some(j) = best else { break };
            let (name, flag) = CATEGORY_NAMES[j];
            self.set_category(&mut fake, flag, additive);
            self.set_category(&mut temp, flag, !additive);
            rules.push(if additive { '+' } else { '-' });
            rules.push('@');
            rules.push_str(name);
            rules.push(' ');
            applied[j] = true;
        }
        for (id, c) in self.commands.iter().enumerate() {
            if c.parent.is_some() {
                continue;
            }
            self.describe_single(sel, &mut fake, id, &mut rules);
            for &s in &c.subs {
                self.describe_single(sel, &mut fake, s as usize, &mut rules);
            }
        }
        rules.pop();
        rules
    }

    fn describe_single(&self, sel: &Selector, fake: &mut Selector, id: usize, rules: &mut String) {
        let userbit = Self::cmd_bit(sel, id);
        if userbit != Self::cmd_bit(fake, id) {
            rules.push(if userbit { '+' } else { '-' });
            rules.push_str(&self.commands[id].full_name);
            rules.push(' ');
            self.change_perm(fake, id as u16, userbit);
        }
        if !userbit {
            if let Some((_, args)) = sel.first_args.iter().find(|(i, _)| *i as usize == id) {
                for a in args {
                    rules.push('+');
                    rules.push_str(&self.commands[id].full_name);
                    rules.push('|');
                    rules.push_str(&String::from_utf8_lossy(a));
                    rules.push(' ');
                }
            }
        }
    }

    fn pattern_string(p: &KeyPattern) -> Vec<u8> {
        let mut s = match p.perm {
            PERM_READ => b"%R~".to_vec(),
            PERM_WRITE => b"%W~".to_vec(),
            _ => b"~".to_vec(),
        };
        s.extend_from_slice(&p.pattern);
        s
    }

    fn describe_selector(&self, sel: &Selector) -> Vec<u8> {
        let mut res = Vec::new();
        if sel.all_keys {
            res.extend_from_slice(b"~* ");
        } else {
            for p in &sel.patterns {
                res.extend_from_slice(&Self::pattern_string(p));
                res.push(b' ');
            }
        }
        if sel.all_channels {
            res.extend_from_slice(b"&* ");
        } else {
            res.extend_from_slice(b"resetchannels ");
            for c in &sel.channels {
                res.push(b'&');
                res.extend_from_slice(c);
                res.push(b' ');
            }
        }
        res.extend_from_slice(self.describe_commands(sel).as_bytes());
        res
    }

    /// A user's rules as ACL LIST and the ACL file show them (Redis's ACLDescribeUser).
    pub fn describe_user(&self, u: &User) -> Vec<u8> {
        let mut res = Vec::new();
        res.extend_from_slice(if u.enabled { b"on " } else { b"off " });
        if u.nopass {
            res.extend_from_slice(b"nopass ");
        }
        match u.sanitize {
            Some(false) => res.extend_from_slice(b"skip-sanitize-payload "),
            Some(true) => res.extend_from_slice(b"sanitize-payload "),
            None => {}
        }
        for p in &u.passwords {
            res.push(b'#');
            res.extend_from_slice(p);
            res.push(b' ');
        }
        for sel in &u.selectors {
            let d = self.describe_selector(sel);
            if sel.root {
                res.extend_from_slice(&d);
            } else {
                res.extend_from_slice(b" (");
                res.extend_from_slice(&d);
                res.push(b')');
            }
        }
        res
    }

    /// `user <name> <rules>` (ACL LIST, ACL SAVE).
    pub fn user_line(&self, u: &User) -> Vec<u8> {
        let mut line = b"user ".to_vec();
        line.extend_from_slice(&u.name);
        line.push(b' ');
        line.extend_from_slice(&self.describe_user(u));
        line
    }

    // --- the check ---------------------------------------------------------------------

    /// Whether `slot`'s user may run `spec` with `args` (the whole command, name
    /// included). Err: what was refused and the argument position to log.
    #[inline(always)]
    pub fn check(
        &self,
        slot: usize,
        spec: &'static CommandSpec,
        args: crate::protocol::request::Args,
    ) -> Result<(), (Denied, usize)> {
        if let Some(u) = self.user(slot) {
            if u.unrestricted || self.allowed_at_once(u, spec, &args) {
                return Ok(());
            }
        }
        self.check_user(slot, spec, args)
    }

    /// The usual cases for a restricted user `u` (a command its `fast` entry allows, a
    /// one-key command whose key a prefix pattern allows) with no call, so it needs no
    /// registers saved. False: not decided here (`check_user` decides). The executor
    /// calls it directly with the user it looked up, `args` by reference: each copy or
    /// repeated lookup here is paid on every command of such a user.
    #[inline(never)]
    pub fn allowed_at_once(
        &self,
        u: &User,
        spec: &'static CommandSpec,
        args: &crate::protocol::request::Args,
    ) -> bool {
        let addr = spec as *const CommandSpec as usize;
        let (a, id) = self.spec_slots[spec_slot(addr)];
        if a != addr {
            return false;
        }
        let Some(&fast) = u.fast.get(id as usize) else {
            return false;
        };
        fast == FAST_ALLOW || Self::one_prefixed_key_allowed(u, fast, args)
    }

    /// The check when `allowed_at_once` did not decide.
    #[inline(never)]
    fn check_user(
        &self,
        slot: usize,
        spec: &'static CommandSpec,
        args: crate::protocol::request::Args,
    ) -> Result<(), (Denied, usize)> {
        let Some(u) = self.user(slot) else {
            return Err((Denied::Command, 0));
        };
        if u.unrestricted {
            return Ok(());
        }
        let id = self.command_id(spec);
        if let Some(id) = id {
            let fast = u.fast.get(id as usize).copied().unwrap_or(FAST_SLOW);
            if fast == FAST_ALLOW
                || (fast & 3 == FAST_ONE_KEY && Self::one_key_allowed(u, fast, args))
            {
                return Ok(());
            }
        }
        self.check_general(u, spec, id, args)
    }

    /// Every selector in turn; the refusal Redis reports when none allows.
    #[inline(never)]
    fn check_general(
        &self,
        u: &User,
        spec: &'static CommandSpec,
        id: Option<u16>,
        args: crate::protocol::request::Args,
    ) -> Result<(), (Denied, usize)> {
        let mut relevant = (Denied::Command, 0usize);
        for sel in &u.selectors {
            match self.check_selector(sel, spec, id, args) {
                Ok(()) => return Ok(()),
                Err((d, pos)) => {
                    if d > relevant.0 || (d == relevant.0 && pos > relevant.1) {
                        relevant = (d, pos);
                    }
                }
            }
        }
        Err(relevant)
    }

    /// The ACL id of a command or subcommand.
    #[inline]
    fn command_id(&self, spec: &'static CommandSpec) -> Option<u16> {
        let addr = spec as *const CommandSpec as usize;
        let (a, id) = self.spec_slots[spec_slot(addr)];
        if a == addr {
            return Some(id);
        }
        self.by_spec.get(&addr).copied()
    }

    /// The usual case of `one_key_allowed` in a few instructions: a key of 8 bytes or
    /// more, prefix patterns, no SET with more arguments than its value. False: not
    /// that case, or refused (`one_key_allowed` then decides).
    #[inline(always)]
    fn one_prefixed_key_allowed(
        u: &User,
        fast: u32,
        args: &crate::protocol::request::Args,
    ) -> bool {
        if fast & 3 != FAST_ONE_KEY || args.len() > (fast >> 16) as usize {
            return false;
        }
        // None when the key position is past the arguments, or the key is short.
        let Some(word) = args.first_word((fast >> 8) as u8 as usize) else {
            return false;
        };
        let need = ((fast >> 2) & PERM_ALL as u32) as usize;
        u.prefix_words[need]
            .iter()
            .any(|&(mask, w)| word & mask == w)
    }

    /// Whether the root selector's patterns allow the key of a `FAST_ONE_KEY` command.
    #[inline(never)]
    fn one_key_allowed(u: &User, fast: u32, args: crate::protocol::request::Args) -> bool {
        let pos = (fast >> 8) as u8 as usize;
        if pos >= args.len() {
            return true;
        }
        let mut need = (fast >> 2) as u8 & PERM_ALL;
        if fast & FAST_SET_RULE != 0 && (3..args.len()).any(|i| args.is(i, "GET")) {
            need = PERM_ALL;
        }
        let key = args.get(pos);
        if key.len() >= 8 && !u.prefixes.is_empty() {
            let word = u64::from_le_bytes(key[..8].try_into().unwrap());
            return u
                .prefixes
                .iter()
                .any(|r| r.perm & need == need && word & r.mask == r.word);
        }
        u.selectors[0]
            .patterns
            .iter()
            .any(|p| p.perm & need == need && p.matches(key))
    }

    // Out of line: `check`'s usual case stays small without the general walk inlined.
    #[inline(never)]
    fn check_selector(
        &self,
        sel: &Selector,
        spec: &'static CommandSpec,
        id: Option<u16>,
        args: crate::protocol::request::Args,
    ) -> Result<(), (Denied, usize)> {
        if !sel.all_commands && spec.flags & super::NO_AUTH == 0 {
            let Some(id) = id else {
                return Err((Denied::Command, 0));
            };
            if !Self::cmd_bit(sel, id as usize) {
                let is_sub = self.commands[id as usize].parent.is_some();
                let idx = if is_sub { 2 } else { 1 };
                let allowed = args.len() >= 2
                    && idx < args.len()
                    && sel.first_args.iter().any(|(i, v)| {
                        *i == id && v.iter().any(|a| a.eq_ignore_ascii_case(args.get(idx)))
                    });
                if !allowed {
                    return Err((Denied::Command, 0));
                }
            }
        }
        let cmd = id.map(|id| &self.commands[id as usize]);
        if !sel.all_keys {
            let Some(cmd) = cmd else {
                return Err((Denied::Key, 0));
            };
            let refused = first_refused_key(cmd, spec, args, |key, need| {
                sel.patterns
                    .iter()
                    .any(|p| p.perm & need == need && p.matches(key))
            });
            if let Some(pos) = refused {
                return Err((Denied::Key, pos));
            }
        }
        let rule = cmd.map_or(ChannelRule::None, |c| c.channel_rule);
        if !sel.all_channels && rule != ChannelRule::None {
            for (pos, is_pattern) in rule.positions(args) {
                let ch = args.get(pos);
                let ok = sel.channels.iter().any(|p| {
                    if is_pattern {
                        p.as_slice() == ch
                    } else {
                        crate::util::glob_match(p, ch, false)
                    }
                });
                if !ok {
                    return Err((Denied::Channel, pos));
                }
            }
        }
        Ok(())
    }

    /// Channel patterns of `slot`'s user (every selector's), None when a selector allows
    /// all channels: what subscriptions may stay after the user changed.
    pub fn channel_rules(&self, slot: usize) -> Option<Vec<Vec<u8>>> {
        let u = self.user(slot)?;
        if u.selectors.iter().any(|s| s.all_channels) {
            return None;
        }
        Some(
            u.selectors
                .iter()
                .flat_map(|s| s.channels.clone())
                .collect(),
        )
    }

    /// Adds a log entry, or counts it into a matching recent one (Redis groups the same
    /// refusal within a minute, looking at the 10 newest entries).
    pub fn log_event(&mut self, mut e: LogEntry, max_len: usize) {
        let found = self.log.iter().take(10).position(|o| {
            o.reason == e.reason
                && o.context == e.context
                && (o.ctime_ms - e.ctime_ms).abs() <= 60_000
                && o.object == e.object
                && o.username == e.username
        });
        if let Some(i) = found {
            let mut old = self.log.remove(i).unwrap();
            old.count += 1;
            old.ctime_ms = e.ctime_ms;
            old.client_info = std::mem::take(&mut e.client_info);
            self.log.push_front(old);
            return;
        }
        self.log.push_front(e);
        self.log.truncate(max_len);
    }

    /// Parses an ACL file's text into users (Redis's ACLLoadFromFile): every error found,
    /// each naming `file:line`, or the users.
    pub fn parse_file(&self, file: &str, text: &[u8]) -> Result<Vec<User>, String> {
        let mut errors = String::new();
        let mut users: Vec<User> = Vec::new();
        for (i, raw) in text.split(|&c| c == b'\n').enumerate() {
            let linenum = i + 1;
            let line = trim(raw, b" \t\r\n");
            if line.is_empty() {
                continue;
            }
            let argv: Vec<Vec<u8>> = line
                .split(|&c| c == b' ')
                .filter(|a| !a.is_empty())
                .map(|a| a.to_vec())
                .collect();
            if argv.is_empty() {
                continue;
            }
            if argv[0] != b"user" || argv.len() < 2 {
                errors.push_str(&format!(
                    "{file}:{linenum} should start with user keyword followed by the username. "
                ));
                continue;
            }
            if has_spaces(&argv[1]) {
                errors.push_str(&format!(
                    "'{file}:{linenum}: username '{}' contains invalid characters. ",
                    String::from_utf8_lossy(&argv[1])
                ));
                continue;
            }
            if users.iter().any(|u| u.name == argv[1]) {
                errors.push_str(&format!(
                    "WARNING: Duplicate user '{}' found on line {linenum}. ",
                    String::from_utf8_lossy(&argv[1])
                ));
                continue;
            }
            let mut u = self.new_user(&argv[1]);
            let merged = match Self::merge_selectors(&argv[2..]) {
                Ok(m) => m,
                Err(_) => {
                    errors.push_str(&format!(
                        "{file}:{linenum}: Unmatched parenthesis in selector definition."
                    ));
                    Vec::new()
                }
            };
            let mut syntax_error = false;
            for op in &merged {
                let op = trim(op, b"\t\r\n");
                if let Err(e) = self.apply(&mut u, op) {
                    if e == RuleError::UnknownCommand {
                        errors.push_str(&format!(
                            "{file}:{linenum}: Error in applying operation '{}': {}. ",
                            String::from_utf8_lossy(op),
                            e.text()
                        ));
                    } else if !syntax_error {
                        errors.push_str(&format!("{file}:{linenum}: {}. ", e.text()));
                        syntax_error = true;
                    }
                }
            }
            self.finish(&mut u);
            users.push(u);
        }
        if errors.is_empty() {
            Ok(users)
        } else {
            errors.push_str(
                "WARNING: ACL errors detected, no change to the previously active ACL rules was performed",
            );
            Err(errors)
        }
    }

    /// `user` lines of the config file (each: name then rules), as Redis loads them at
    /// startup: the default user is reset first when it is listed.
    pub fn users_from_config(&self, lines: &[Vec<String>]) -> Result<Vec<User>, String> {
        let mut users: Vec<User> = Vec::new();
        for line in lines {
            let Some(name) = line.first() else { continue };
            if has_spaces(name.as_bytes()) {
                return Err("Spaces not allowed in ACL usernames".into());
            }
            if users.iter().any(|u| u.name == name.as_bytes()) {
                return Err(format!(
                    "Error in user declaration '{name}': {}",
                    "Duplicate user found. A user can only be defined once in config files"
                ));
            }
            let ops: Vec<Vec<u8>> = line[1..].iter().map(|s| s.as_bytes().to_vec()).collect();
            let merged = Self::merge_selectors(&ops).map_err(|j| {
                format!(
                    "Unmatched parenthesis in acl selector starting at '{}'.",
                    line[1 + j]
                )
            })?;
            let mut u = self.new_user(name.as_bytes());
            if name == "default" {
                let _ = self.apply(&mut u, b"reset");
            }
            for op in &merged {
                self.apply(&mut u, op).map_err(|e| {
                    format!(
                        "Error loading ACL rule '{}' for the user named '{name}': {}",
                        String::from_utf8_lossy(op),
                        e.text()
                    )
                })?;
            }
            self.finish(&mut u);
            users.push(u);
        }
        Ok(users)
    }
}

fn trim<'a>(s: &'a [u8], set: &[u8]) -> &'a [u8] {
    let start = s.iter().position(|c| !set.contains(c)).unwrap_or(s.len());
    let end = s
        .iter()
        .rposition(|c| !set.contains(c))
        .map_or(start, |e| e + 1);
    &s[start..end.max(start)]
}

/// Write commands whose keys Redis 7.0's key specs declare without `access` (they insert,
/// update or delete but return nothing of the value): write permission only.
const WRITE_ONLY_KEYS: &[&str] = &[
    "append",
    "del",
    "expire",
    "expireat",
    "geoadd",
    "hdel",
    "hmset",
    "hset",
    "hsetnx",
    "linsert",
    "lpush",
    "lpushx",
    "lrem",
    "lset",
    "ltrim",
    "mset",
    "msetnx",
    "persist",
    "pexpire",
    "pexpireat",
    "pfadd",
    "psetex",
    "restore",
    "rpush",
    "rpushx",
    "sadd",
    "setex",
    "setnx",
    "setrange",
    "srem",
    "unlink",
    "xack",
    "xadd",
    "xautoclaim",
    "xclaim",
    "xdel",
    "xsetid",
    "xtrim",
    "zadd",
    "zrem",
    "zremrangebylex",
    "zremrangebyrank",
    "zremrangebyscore",
];

/// What a command's keys need, from Redis 7.0's key specs (ACCESS asks read; INSERT /
/// UPDATE / DELETE ask write), by key ordinal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum KeyRule {
    /// No key checked (shard channels are keys for cluster slots only: Redis's
    /// `not_key`).
    NoKeys,
    /// Every key needs this (read for read-only commands).
    All(u8),
    /// A destination written, then sources read (SUNIONSTORE, BITOP...).
    DestThenSources,
    /// PFMERGE: the destination read and written, the sources read.
    MergeThenSources,
    /// A source read and changed, then a destination written (LMOVE, RENAME...).
    SourceChangedThenDest,
    /// A source read, then destinations written (COPY, SORT ... STORE, GEORADIUS STORE).
    SourceThenDests,
    /// SET: read too only with GET (Redis's setGetKeys).
    Set,
}

impl KeyRule {
    fn of(spec: &CommandSpec) -> KeyRule {
        if matches!(spec.name, "spublish" | "ssubscribe" | "sunsubscribe") {
            return KeyRule::NoKeys;
        }
        if spec.flags & super::WRITE == 0 {
            return KeyRule::All(PERM_READ);
        }
        match spec.name {
            "bitop" | "geosearchstore" | "sdiffstore" | "sinterstore" | "sunionstore"
            | "zdiffstore" | "zinterstore" | "zrangestore" | "zunionstore" => {
                KeyRule::DestThenSources
            }
            "pfmerge" => KeyRule::MergeThenSources,
            "blmove" | "brpoplpush" | "lmove" | "rpoplpush" | "smove" | "rename" | "renamenx" => {
                KeyRule::SourceChangedThenDest
            }
            "copy" | "georadius" | "georadiusbymember" | "sort" => KeyRule::SourceThenDests,
            "set" => KeyRule::Set,
            name if WRITE_ONLY_KEYS.contains(&name) => KeyRule::All(PERM_WRITE),
            // Everything else reads what it changes (INCR, LPOP, GETDEL, SPOP...).
            _ => KeyRule::All(PERM_ALL),
        }
    }

    fn need(self, args: crate::protocol::request::Args, ordinal: usize) -> u8 {
        let first = ordinal == 0;
        match self {
            KeyRule::NoKeys => 0,
            KeyRule::All(p) => p,
            KeyRule::DestThenSources if first => PERM_WRITE,
            KeyRule::DestThenSources => PERM_READ,
            KeyRule::MergeThenSources if first => PERM_ALL,
            KeyRule::MergeThenSources => PERM_READ,
            KeyRule::SourceChangedThenDest if first => PERM_ALL,
            KeyRule::SourceChangedThenDest => PERM_WRITE,
            KeyRule::SourceThenDests if first => PERM_READ,
            KeyRule::SourceThenDests => PERM_WRITE,
            KeyRule::Set => {
                if (3..args.len()).any(|i| args.is(i, "GET")) {
                    PERM_ALL
                } else {
                    PERM_WRITE
                }
            }
        }
    }
}

/// The position of the first key of the command that `allowed(key, need)` refuses
/// (need: read 1, write 2, both 3), None when all pass. Positions are
/// `propagate::keys_of`'s; the needs follow Redis 7.0's key-spec flags per command
/// (`KeyRule`) rather than a key-spec table. BITFIELD, whose flags vary with its
/// subcommands in Redis, always needs both here. Keys are checked as they are found:
/// nothing is collected for the commands with fixed key positions (most of them), as
/// the check runs on every command of a restricted user.
fn first_refused_key(
    cmd: &AclCommand,
    spec: &CommandSpec,
    args: crate::protocol::request::Args,
    allowed: impl Fn(&[u8], u8) -> bool,
) -> Option<usize> {
    if cmd.key_rule == KeyRule::NoKeys {
        return None;
    }
    let refused = |ordinal: usize, p: usize| {
        p < args.len() && !allowed(args.get(p), cmd.key_rule.need(args, ordinal))
    };
    if cmd.key_proc {
        let positions = super::propagate::keys_of(spec, args).unwrap_or_default();
        positions
            .into_iter()
            .enumerate()
            .find(|&(o, p)| refused(o, p))
            .map(|(_, p)| p)
    } else {
        super::propagate::key_indices(spec, args.len())
            .enumerate()
            .find(|&(o, p)| refused(o, p))
            .map(|(_, p)| p)
    }
}

/// Which channel arguments a command's permission depends on (Redis checks publishing
/// and subscribing, not unsubscribing).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ChannelRule {
    None,
    Publish,
    Subscribe,
    PSubscribe,
}

impl ChannelRule {
    fn of(spec: &CommandSpec) -> ChannelRule {
        match spec.name {
            "publish" | "spublish" => ChannelRule::Publish,
            "subscribe" | "ssubscribe" => ChannelRule::Subscribe,
            "psubscribe" => ChannelRule::PSubscribe,
            _ => ChannelRule::None,
        }
    }

    /// (position, is a pattern) of each channel argument.
    fn positions(
        self,
        args: crate::protocol::request::Args,
    ) -> impl Iterator<Item = (usize, bool)> {
        let (range, pattern) = match self {
            ChannelRule::Publish => (1..2.min(args.len()), false),
            ChannelRule::Subscribe => (1..args.len(), false),
            ChannelRule::PSubscribe => (1..args.len(), true),
            ChannelRule::None => (0..0, false),
        };
        range.map(move |p| (p, pattern))
    }
}

/// The arguments MONITOR and SLOWLOG show for a command carrying secrets, with those
/// replaced by `(redacted)` as Redis's redactClientCommandArgument does: AUTH's, HELLO's
/// AUTH pair, ACL SETUSER's user and rules, CONFIG SET's value of a sensitive option.
/// None: shown as sent. Returns (bytes, ranges) for `Args::new`.
#[allow(clippy::type_complexity)]
pub fn redacted(
    spec: &CommandSpec,
    parent: Option<&CommandSpec>,
    args: crate::protocol::request::Args,
) -> Option<(Vec<u8>, Vec<(usize, usize)>)> {
    let hide: Vec<usize> = match (parent.map(|p| p.name), spec.name) {
        (None, "auth") => (1..args.len()).collect(),
        (None, "hello") => {
            let mut v = Vec::new();
            let mut i = 2;
            while i < args.len() {
                if args.is(i, "AUTH") && i + 2 < args.len() {
                    v.extend([i + 1, i + 2]);
                    i += 3;
                } else {
                    i += 1;
                }
            }
            v
        }
        (Some("acl"), "setuser") => (2..args.len()).collect(),
        (Some("config"), "set") => (2..args.len())
            .step_by(2)
            .filter(|&i| {
                [
                    "requirepass",
                    "masterauth",
                    "tls-key-file-pass",
                    "tls-client-key-file-pass",
                ]
                .iter()
                .any(|o| args.is(i, o))
            })
            .map(|i| i + 1)
            .filter(|&i| i < args.len())
            .collect(),
        _ => return None,
    };
    if hide.is_empty() {
        return None;
    }
    let (mut data, mut ranges) = (Vec::new(), Vec::new());
    for i in 0..args.len() {
        let a: &[u8] = if hide.contains(&i) {
            b"(redacted)"
        } else {
            args.get(i)
        };
        ranges.push((data.len(), a.len()));
        data.extend_from_slice(a);
    }
    Some((data, ranges))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acl() -> Acl {
        Acl::new(&CommandTable::build())
    }

    fn user(acl: &Acl, ops: &[&str]) -> User {
        let mut u = acl.new_user(b"u");
        for op in ops {
            acl.apply(&mut u, op.as_bytes()).unwrap();
        }
        acl.finish(&mut u);
        u
    }

    #[test]
    fn passwords_are_sha256_hex() {
        assert_eq!(
            hash_password(b"password"),
            b"5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8".to_vec()
        );
        let mut a = acl();
        a.set_user(b"bob", &[b"on".to_vec(), b">secret".to_vec()])
            .unwrap();
        assert!(a.authenticate(b"bob", b"secret").is_some());
        assert!(a.authenticate(b"bob", b"Secret").is_none());
        assert!(a.authenticate(b"nobody", b"secret").is_none());
    }

    /// A description applied to a fresh user rebuilds the same command bitmap (Redis
    /// panics when it does not; here it is checked for a spread of rule sets).
    #[test]
    fn descriptions_rebuild_the_same_permissions() {
        let a = acl();
        let sets: &[&[&str]] = &[
            &["+@all"],
            &["-@all", "+get", "+config|get", "+select|0"],
            &["+@all", "-@dangerous", "+flushdb", "-client|kill"],
            &["+@read", "+@write", "-@hash", "-del"],
            &["+@slow", "-@admin", "+acl|whoami"],
        ];
        for ops in sets {
            let u = user(&a, ops);
            let text = a.describe_commands(&u.selectors[0]);
            let again: Vec<&str> = text.split(' ').collect();
            let v = user(&a, &again);
            assert_eq!(
                u.selectors[0].allowed, v.selectors[0].allowed,
                "{ops:?} -> {text}"
            );
            assert_eq!(
                u.selectors[0].first_args, v.selectors[0].first_args,
                "{text}"
            );
        }
    }

    #[test]
    fn bad_rules_are_refused_with_their_reason() {
        let a = acl();
        let mut u = a.new_user(b"u");
        assert_eq!(a.apply(&mut u, b"+nosuch"), Err(RuleError::UnknownCommand));
        assert_eq!(a.apply(&mut u, b"%Q~x"), Err(RuleError::Syntax));
        assert_eq!(a.apply(&mut u, b"#12"), Err(RuleError::BadHash));
        assert_eq!(a.apply(&mut u, b"<x"), Err(RuleError::NoSuchPassword));
        assert_eq!(
            a.apply(&mut u, b"+config|get|x"),
            Err(RuleError::FirstArgOfSub)
        );
        a.apply(&mut u, b"allkeys").unwrap();
        assert_eq!(a.apply(&mut u, b"~a"), Err(RuleError::KeyAfterAll));
        assert_eq!(
            Acl::merge_selectors(&[b"(~a".to_vec(), b"+get".to_vec()]),
            Err(0)
        );
        assert_eq!(
            Acl::merge_selectors(&[b"(~a".to_vec(), b"+get)".to_vec(), b"on".to_vec()]),
            Ok(vec![b"(~a +get)".to_vec(), b"on".to_vec()])
        );
    }

    #[test]
    fn the_default_user_is_unrestricted_until_restricted() {
        let mut a = acl();
        assert!(a.unrestricted(DEFAULT_USER) && a.default_needs_no_auth());
        a.set_default_password(Some(b"pw"));
        assert!(!a.default_needs_no_auth() && a.unrestricted(DEFAULT_USER));
        a.set_user(b"default", &[b"resetkeys".to_vec(), b"~k*".to_vec()])
            .unwrap();
        assert!(!a.unrestricted(DEFAULT_USER));
        assert!(!a.unrestricted(12345));
    }

    #[test]
    fn pattern_matchers_agree_with_the_glob() {
        let patterns: [&[u8]; 18] = [
            b"key:*",
            b"key:**",
            b"key",
            b"",
            b"*",
            b"k?y:*",
            b"key:*x",
            b"[k]ey:*",
            b"key\\*",
            b"key:\\",
            b"*key",
            b"ke*y:*",
            b"key:[",
            b"key:*?",
            b"counter:*",
            b"mylongprefix:*",
            b"k*",
            b"key:0001*",
        ];
        let keys: [&[u8]; 16] = [
            b"key:1",
            b"key:",
            b"key",
            b"ke",
            b"",
            b"key:*",
            b"KEY:1",
            b"xkey:1",
            b"key\\x",
            b"key:000123456",
            b"kez:000123456",
            b"counter:",
            b"counter:12345",
            b"counter;12345",
            b"mylongprefix:a",
            b"mylongprefiX:abc",
        ];
        for p in patterns {
            let kp = KeyPattern::new(PERM_ALL, p);
            for k in keys {
                assert_eq!(
                    kp.matches(k),
                    crate::util::glob_match(p, k, false),
                    "{:?} vs {:?}",
                    String::from_utf8_lossy(p),
                    String::from_utf8_lossy(k)
                );
            }
        }
        assert_eq!(Matcher::of(b"key:*"), Matcher::Prefix(4));
        assert_eq!(Matcher::of(b"key:1"), Matcher::Exact);
        assert_eq!(Matcher::of(b"key:?*"), Matcher::Glob);
    }

    #[test]
    fn the_fast_check_answers_as_the_general_walk() {
        let table = CommandTable::build();
        let mut a = Acl::new(&table);
        let rules: [&[&str]; 6] = [
            &["on", "~key:*", "~counter:*", "+@all"],
            &["on", "%R~key:*", "%W~w*", "+@all", "-set"],
            &[
                "on", "~k", "~*x", "+get", "+set", "+mset", "+copy", "+publish",
            ],
            &["on", "allkeys", "+@read"],
            &["on", "~a*", "&ch", "+@all"],
            &["on", "~key:*", "+@all", "(~oth* +get)", "(%R~k +@read)"],
        ];
        let commands: [&[&str]; 21] = [
            &["get", "key:1"],
            &["get", "other"],
            &["set", "key:1", "v"],
            &["set", "key:1", "v", "GET"],
            &["set", "wx", "v", "get"],
            &["mset", "key:1", "v", "k", "v"],
            &["mset", "k", "v", "zz", "v"],
            &["copy", "key:1", "counter:2"],
            &["publish", "ch", "m"],
            &["get", ""],
            &["ping"],
            &["lmove", "ax", "kx", "left", "right"],
            &["get", "key:12345678"],
            &["get", "other:12345678"],
            &["set", "counter:1234", "v", "GET"],
            &["incr", "wxyz12345678"],
            &["hset", "key:12345678", "f", "v", "g", "w"],
            &["hset", "other:12345678", "f", "v"],
            &["set", "key:12345678", "v", "EX", "10"],
            &["get", "wxyz12345678"],
            &["set", "wxyz12345678", "v"],
        ];
        for (i, r) in rules.iter().enumerate() {
            let name = format!("u{i}");
            let ops: Vec<Vec<u8>> = r.iter().map(|o| o.as_bytes().to_vec()).collect();
            a.set_user(name.as_bytes(), &ops).unwrap();
            let slot = a.slot_of(name.as_bytes()).unwrap();
            let sel = a.user(slot).unwrap().selectors[0].clone();
            for c in commands {
                let spec = table.lookup(c[0].as_bytes()).unwrap();
                let mut buf = Vec::new();
                let mut ranges = Vec::new();
                for w in c {
                    ranges.push((buf.len(), w.len()));
                    buf.extend_from_slice(w.as_bytes());
                }
                let args = crate::protocol::request::Args::new(&buf, &ranges);
                let id = a.command_id(spec).unwrap();
                let general = a.check_selector(&sel, spec, Some(id), args);
                let user = a.user(slot).unwrap();
                let fast = user.fast[id as usize];
                if fast == FAST_ALLOW
                    || (fast & 3 == FAST_ONE_KEY && Acl::one_key_allowed(user, fast, args))
                {
                    assert_eq!(general, Ok(()), "{r:?} {c:?}");
                }
                let walk = a.check_general(a.user(slot).unwrap(), spec, Some(id), args);
                if general == Ok(()) {
                    assert_eq!(walk, Ok(()), "{r:?} {c:?}");
                }
                assert_eq!(a.check(slot, spec, args), walk, "{r:?} {c:?}");
            }
        }
        // Every command and subcommand has its id, whichever map holds it.
        for (id, c) in a.commands.iter().enumerate() {
            assert_eq!(a.command_id(c.spec), Some(id as u16));
        }
    }
}
