//! What COMMAND DOCS tells of each command as Redis 7.0 documents it, by full command name
//! (`client|kill`): summary, version it came in, complexity, doc flags, deprecation,
//! history and the argument tree. The group comes from the command table.
//!
//! The rows are data: one per command or subcommand, sorted by name. A command without a
//! row (one Redis 7.0 does not have) is documented by its table entry's summary and since.

/// Doc flags, in the order COMMAND DOCS shows them.
pub const DEPRECATED: u8 = 1 << 0;
pub const SYSCMD: u8 = 1 << 1;
pub const DOC_FLAG_NAMES: &[(u8, &str)] = &[(DEPRECATED, "deprecated"), (SYSCMD, "syscmd")];

/// Argument flags, in the order COMMAND DOCS shows them.
pub const OPTIONAL: u8 = 1 << 0;
pub const MULTIPLE: u8 = 1 << 1;
pub const MULTIPLE_TOKEN: u8 = 1 << 2;
pub const ARG_FLAG_NAMES: &[(u8, &str)] = &[
    (OPTIONAL, "optional"),
    (MULTIPLE, "multiple"),
    (MULTIPLE_TOKEN, "multiple_token"),
];

/// One argument: its name, type (`key`, `string`, `integer`, `double`, `pattern`,
/// `unix-time`, `pure-token`, `oneof`, `block`) and, for `oneof` / `block`, its parts.
pub struct Arg {
    pub name: &'static str,
    pub kind: &'static str,
    /// Which of the command's key specs a `key` argument is; -1: none.
    pub key_spec_index: i32,
    /// The word that introduces it (`Some("")`: MIGRATE's empty key is a token).
    pub token: Option<&'static str>,
    pub since: &'static str,
    pub deprecated_since: &'static str,
    pub flags: u8,
    pub args: &'static [Arg],
}

impl Arg {
    const fn key(mut self, index: i32) -> Arg {
        self.key_spec_index = index;
        self
    }
    const fn tok(mut self, token: &'static str) -> Arg {
        self.token = Some(token);
        self
    }
    const fn since(mut self, version: &'static str) -> Arg {
        self.since = version;
        self
    }
    const fn dep(mut self, version: &'static str) -> Arg {
        self.deprecated_since = version;
        self
    }
    const fn opt(mut self) -> Arg {
        self.flags |= OPTIONAL;
        self
    }
    const fn multi(mut self) -> Arg {
        self.flags |= MULTIPLE;
        self
    }
    const fn multi_tok(mut self) -> Arg {
        self.flags |= MULTIPLE_TOKEN;
        self
    }
    const fn args(mut self, args: &'static [Arg]) -> Arg {
        self.args = args;
        self
    }
}

const fn a(name: &'static str, kind: &'static str) -> Arg {
    Arg {
        name,
        kind,
        key_spec_index: -1,
        token: None,
        since: "",
        deprecated_since: "",
        flags: 0,
        args: &[],
    }
}

pub struct Doc {
    pub name: &'static str,
    pub summary: &'static str,
    pub since: &'static str,
    pub complexity: &'static str,
    pub doc_flags: u8,
    pub deprecated_since: &'static str,
    pub replaced_by: &'static str,
    /// (version, what changed)
    pub history: &'static [(&'static str, &'static str)],
    pub args: &'static [Arg],
}

impl Doc {
    const fn new(
        name: &'static str,
        summary: &'static str,
        since: &'static str,
        complexity: &'static str,
    ) -> Doc {
        Doc {
            name,
            summary,
            since,
            complexity,
            doc_flags: 0,
            deprecated_since: "",
            replaced_by: "",
            history: &[],
            args: &[],
        }
    }
    const fn flags(mut self, flags: u8) -> Doc {
        self.doc_flags = flags;
        self
    }
    const fn deprecated(mut self, since: &'static str, replaced_by: &'static str) -> Doc {
        self.deprecated_since = since;
        self.replaced_by = replaced_by;
        self
    }
    const fn history(mut self, history: &'static [(&'static str, &'static str)]) -> Doc {
        self.history = history;
        self
    }
    const fn args(mut self, args: &'static [Arg]) -> Doc {
        self.args = args;
        self
    }
}

/// A command's documentation row.
pub fn lookup(full_name: &str) -> Option<&'static Doc> {
    DOCS.binary_search_by(|d| d.name.cmp(full_name))
        .ok()
        .map(|i| &DOCS[i])
}

#[rustfmt::skip]
static DOCS: &[Doc] = &[
    Doc::new("acl", "A container for Access List Control commands ", "6.0.0", "Depends on subcommand."),
    Doc::new("acl|cat", "List the ACL categories or the commands inside a category", "6.0.0", "O(1) since the categories and commands are a fixed set.").args(&[a("categoryname", "string").opt()]),
    Doc::new("acl|deluser", "Remove the specified ACL users and the associated rules", "6.0.0", "O(1) amortized time considering the typical user.").args(&[a("username", "string").multi()]),
    Doc::new("acl|dryrun", "Returns whether the user can execute the given command without executing the command.", "7.0.0", "O(1).").args(&[a("username", "string"), a("command", "string"), a("arg", "string").opt().multi()]),
    Doc::new("acl|genpass", "Generate a pseudorandom secure password to use for ACL users", "6.0.0", "O(1)").args(&[a("bits", "integer").opt()]),
    Doc::new("acl|getuser", "Get the rules for a specific ACL user", "6.0.0", "O(N). Where N is the number of password, command and pattern rules that the user has.").history(&[("6.2.0", "Added Pub/Sub channel patterns."), ("7.0.0", "Added selectors and changed the format of key and channel patterns from a list to their rule representation.")]).args(&[a("username", "string")]),
    Doc::new("acl|help", "Show helpful text about the different subcommands", "6.0.0", "O(1)"),
    Doc::new("acl|list", "List the current ACL rules in ACL config file format", "6.0.0", "O(N). Where N is the number of configured users."),
    Doc::new("acl|load", "Reload the ACLs from the configured ACL file", "6.0.0", "O(N). Where N is the number of configured users."),
    Doc::new("acl|log", "List latest events denied because of ACLs in place", "6.0.0", "O(N) with N being the number of entries shown.").args(&[a("operation", "oneof").opt().args(&[a("count", "integer"), a("reset", "pure-token").tok("RESET")])]),
    Doc::new("acl|save", "Save the current ACL rules in the configured ACL file", "6.0.0", "O(N). Where N is the number of configured users."),
    Doc::new("acl|setuser", "Modify or create the rules for a specific ACL user", "6.0.0", "O(N). Where N is the number of rules provided.").history(&[("6.2.0", "Added Pub/Sub channel patterns."), ("7.0.0", "Added selectors and key based permissions.")]).args(&[a("username", "string"), a("rule", "string").opt().multi()]),
    Doc::new("acl|users", "List the username of all the configured ACL rules", "6.0.0", "O(N). Where N is the number of configured users."),
    Doc::new("acl|whoami", "Return the name of the user associated to the current connection", "6.0.0", "O(1)"),
    Doc::new("append", "Append a value to a key", "2.0.0", "O(1). The amortized time complexity is O(1) assuming the appended value is small and the already present value is of any size, since the dynamic string library used by Redis will double the free space available on every reallocation.").args(&[a("key", "key").key(0), a("value", "string")]),
    Doc::new("asking", "Sent by cluster clients after an -ASK redirect", "3.0.0", "O(1)"),
    Doc::new("auth", "Authenticate to the server", "1.0.0", "O(N) where N is the number of passwords defined for the user").history(&[("6.0.0", "Added ACL style (username and password).")]).args(&[a("username", "string").since("6.0.0").opt(), a("password", "string")]),
    Doc::new("bgrewriteaof", "Asynchronously rewrite the append-only file", "1.0.0", "O(1)"),
    Doc::new("bgsave", "Asynchronously save the dataset to disk", "1.0.0", "O(1)").history(&[("3.2.2", "Added the `SCHEDULE` option.")]).args(&[a("schedule", "pure-token").tok("SCHEDULE").since("3.2.2").opt()]),
    Doc::new("bitcount", "Count set bits in a string", "2.6.0", "O(N)").history(&[("7.0.0", "Added the `BYTE|BIT` option.")]).args(&[a("key", "key").key(0), a("index", "block").opt().args(&[a("start", "integer"), a("end", "integer"), a("index_unit", "oneof").since("7.0.0").opt().args(&[a("byte", "pure-token").tok("BYTE"), a("bit", "pure-token").tok("BIT")])])]),
    Doc::new("bitfield", "Perform arbitrary bitfield integer operations on strings", "3.2.0", "O(1) for each subcommand specified").args(&[a("key", "key").key(0), a("operation", "oneof").opt().multi().args(&[a("encoding_offset", "block").tok("GET").args(&[a("encoding", "string"), a("offset", "integer")]), a("write", "block").args(&[a("wrap_sat_fail", "oneof").tok("OVERFLOW").opt().args(&[a("wrap", "pure-token").tok("WRAP"), a("sat", "pure-token").tok("SAT"), a("fail", "pure-token").tok("FAIL")]), a("write_operation", "oneof").args(&[a("encoding_offset_value", "block").tok("SET").args(&[a("encoding", "string"), a("offset", "integer"), a("value", "integer")]), a("encoding_offset_increment", "block").tok("INCRBY").args(&[a("encoding", "string"), a("offset", "integer"), a("increment", "integer")])])])])]),
    Doc::new("bitfield_ro", "Perform arbitrary bitfield integer operations on strings. Read-only variant of BITFIELD", "6.0.0", "O(1) for each subcommand specified").args(&[a("key", "key").key(0), a("encoding_offset", "block").tok("GET").opt().multi().multi_tok().args(&[a("encoding", "string"), a("offset", "integer")])]),
    Doc::new("bitop", "Perform bitwise operations between strings", "2.6.0", "O(N)").args(&[a("operation", "string"), a("destkey", "key").key(0), a("key", "key").key(1).multi()]),
    Doc::new("bitpos", "Find first bit set or clear in a string", "2.8.7", "O(N)").history(&[("7.0.0", "Added the `BYTE|BIT` option.")]).args(&[a("key", "key").key(0), a("bit", "integer"), a("index", "block").opt().args(&[a("start", "integer"), a("end_index", "block").opt().args(&[a("end", "integer"), a("index_unit", "oneof").since("7.0.0").opt().args(&[a("byte", "pure-token").tok("BYTE"), a("bit", "pure-token").tok("BIT")])])])]),
    Doc::new("blmove", "Pop an element from a list, push it to another list and return it; or block until one is available", "6.2.0", "O(1)").args(&[a("source", "key").key(0), a("destination", "key").key(1), a("wherefrom", "oneof").args(&[a("left", "pure-token").tok("LEFT"), a("right", "pure-token").tok("RIGHT")]), a("whereto", "oneof").args(&[a("left", "pure-token").tok("LEFT"), a("right", "pure-token").tok("RIGHT")]), a("timeout", "double")]),
    Doc::new("blmpop", "Pop elements from a list, or block until one is available", "7.0.0", "O(N+M) where N is the number of provided keys and M is the number of elements returned.").args(&[a("timeout", "double"), a("numkeys", "integer"), a("key", "key").key(0).multi(), a("where", "oneof").args(&[a("left", "pure-token").tok("LEFT"), a("right", "pure-token").tok("RIGHT")]), a("count", "integer").tok("COUNT").opt()]),
    Doc::new("blpop", "Remove and get the first element in a list, or block until one is available", "2.0.0", "O(N) where N is the number of provided keys.").history(&[("6.0.0", "`timeout` is interpreted as a double instead of an integer.")]).args(&[a("key", "key").key(0).multi(), a("timeout", "double")]),
    Doc::new("brpop", "Remove and get the last element in a list, or block until one is available", "2.0.0", "O(N) where N is the number of provided keys.").history(&[("6.0.0", "`timeout` is interpreted as a double instead of an integer.")]).args(&[a("key", "key").key(0).multi(), a("timeout", "double")]),
    Doc::new("brpoplpush", "Pop an element from a list, push it to another list and return it; or block until one is available", "2.2.0", "O(1)").flags(DEPRECATED).deprecated("6.2.0", "`BLMOVE` with the `RIGHT` and `LEFT` arguments").history(&[("6.0.0", "`timeout` is interpreted as a double instead of an integer.")]).args(&[a("source", "key").key(0), a("destination", "key").key(1), a("timeout", "double")]),
    Doc::new("bzmpop", "Remove and return members with scores in a sorted set or block until one is available", "7.0.0", "O(K) + O(M*log(N)) where K is the number of provided keys, N being the number of elements in the sorted set, and M being the number of elements popped.").args(&[a("timeout", "double"), a("numkeys", "integer"), a("key", "key").key(0).multi(), a("where", "oneof").args(&[a("min", "pure-token").tok("MIN"), a("max", "pure-token").tok("MAX")]), a("count", "integer").tok("COUNT").opt()]),
    Doc::new("bzpopmax", "Remove and return the member with the highest score from one or more sorted sets, or block until one is available", "5.0.0", "O(log(N)) with N being the number of elements in the sorted set.").history(&[("6.0.0", "`timeout` is interpreted as a double instead of an integer.")]).args(&[a("key", "key").key(0).multi(), a("timeout", "double")]),
    Doc::new("bzpopmin", "Remove and return the member with the lowest score from one or more sorted sets, or block until one is available", "5.0.0", "O(log(N)) with N being the number of elements in the sorted set.").history(&[("6.0.0", "`timeout` is interpreted as a double instead of an integer.")]).args(&[a("key", "key").key(0).multi(), a("timeout", "double")]),
    Doc::new("client", "A container for client connection commands", "2.4.0", "Depends on subcommand."),
    Doc::new("client|caching", "Instruct the server about tracking or not keys in the next request", "6.0.0", "O(1)").args(&[a("mode", "oneof").args(&[a("yes", "pure-token").tok("YES"), a("no", "pure-token").tok("NO")])]),
    Doc::new("client|getname", "Get the current connection name", "2.6.9", "O(1)"),
    Doc::new("client|getredir", "Get tracking notifications redirection client ID if any", "6.0.0", "O(1)"),
    Doc::new("client|help", "Show helpful text about the different subcommands", "5.0.0", "O(1)"),
    Doc::new("client|id", "Returns the client ID for the current connection", "5.0.0", "O(1)"),
    Doc::new("client|info", "Returns information about the current client connection.", "6.2.0", "O(1)"),
    Doc::new("client|kill", "Kill the connection of a client", "2.4.0", "O(N) where N is the number of client connections").history(&[("2.8.12", "Added new filter format."), ("2.8.12", "`ID` option."), ("3.2.0", "Added `master` type in for `TYPE` option."), ("5.0.0", "Replaced `slave` `TYPE` with `replica`. `slave` still supported for backward compatibility."), ("6.2.0", "`LADDR` option.")]).args(&[a("filter", "oneof").args(&[a("ip:port", "string").dep("2.8.12"), a("new-format", "oneof").multi().args(&[a("client-id", "integer").tok("ID").since("2.8.12").opt(), a("normal_master_slave_pubsub", "oneof").tok("TYPE").since("2.8.12").opt().args(&[a("normal", "pure-token").tok("NORMAL"), a("master", "pure-token").tok("MASTER").since("3.2.0"), a("slave", "pure-token").tok("SLAVE"), a("replica", "pure-token").tok("REPLICA").since("5.0.0"), a("pubsub", "pure-token").tok("PUBSUB")]), a("username", "string").tok("USER").opt(), a("ip:port", "string").tok("ADDR").opt(), a("ip:port", "string").tok("LADDR").since("6.2.0").opt(), a("yes/no", "string").tok("SKIPME").opt()])])]),
    Doc::new("client|list", "Get the list of client connections", "2.4.0", "O(N) where N is the number of client connections").history(&[("2.8.12", "Added unique client `id` field."), ("5.0.0", "Added optional `TYPE` filter."), ("6.0.0", "Added `user` field."), ("6.2.0", "Added `argv-mem`, `tot-mem`, `laddr` and `redir` fields and the optional `ID` filter."), ("7.0.0", "Added `resp`, `multi-mem`, `rbs` and `rbp` fields."), ("7.0.3", "Added `ssub` field.")]).args(&[a("normal_master_replica_pubsub", "oneof").tok("TYPE").since("5.0.0").opt().args(&[a("normal", "pure-token").tok("NORMAL"), a("master", "pure-token").tok("MASTER"), a("replica", "pure-token").tok("REPLICA"), a("pubsub", "pure-token").tok("PUBSUB")]), a("id", "block").tok("ID").since("6.2.0").opt().args(&[a("client-id", "integer").multi()])]),
    Doc::new("client|no-evict", "Set client eviction mode for the current connection", "7.0.0", "O(1)").args(&[a("enabled", "oneof").args(&[a("on", "pure-token").tok("ON"), a("off", "pure-token").tok("OFF")])]),
    Doc::new("client|pause", "Stop processing commands from clients for some time", "2.9.50", "O(1)").history(&[("6.2.0", "`CLIENT PAUSE WRITE` mode added along with the `mode` option.")]).args(&[a("timeout", "integer"), a("mode", "oneof").since("6.2.0").opt().args(&[a("write", "pure-token").tok("WRITE"), a("all", "pure-token").tok("ALL")])]),
    Doc::new("client|reply", "Instruct the server whether to reply to commands", "3.2.0", "O(1)").args(&[a("on_off_skip", "oneof").args(&[a("on", "pure-token").tok("ON"), a("off", "pure-token").tok("OFF"), a("skip", "pure-token").tok("SKIP")])]),
    Doc::new("client|setname", "Set the current connection name", "2.6.9", "O(1)").args(&[a("connection-name", "string")]),
    Doc::new("client|tracking", "Enable or disable server assisted client side caching support", "6.0.0", "O(1). Some options may introduce additional complexity.").args(&[a("status", "oneof").args(&[a("on", "pure-token").tok("ON"), a("off", "pure-token").tok("OFF")]), a("client-id", "integer").tok("REDIRECT").opt(), a("prefix", "string").tok("PREFIX").opt().multi().multi_tok(), a("bcast", "pure-token").tok("BCAST").opt(), a("optin", "pure-token").tok("OPTIN").opt(), a("optout", "pure-token").tok("OPTOUT").opt(), a("noloop", "pure-token").tok("NOLOOP").opt()]),
    Doc::new("client|trackinginfo", "Return information about server assisted client side caching for the current connection", "6.2.0", "O(1)"),
    Doc::new("client|unblock", "Unblock a client blocked in a blocking command from a different connection", "5.0.0", "O(log N) where N is the number of client connections").args(&[a("client-id", "integer"), a("timeout_error", "oneof").opt().args(&[a("timeout", "pure-token").tok("TIMEOUT"), a("error", "pure-token").tok("ERROR")])]),
    Doc::new("client|unpause", "Resume processing of clients that were paused", "6.2.0", "O(N) Where N is the number of paused clients"),
    Doc::new("cluster", "A container for cluster commands", "3.0.0", "Depends on subcommand."),
    Doc::new("cluster|addslots", "Assign new hash slots to receiving node", "3.0.0", "O(N) where N is the total number of hash slot arguments").args(&[a("slot", "integer").multi()]),
    Doc::new("cluster|addslotsrange", "Assign new hash slots to receiving node", "7.0.0", "O(N) where N is the total number of the slots between the start slot and end slot arguments.").args(&[a("start-slot_end-slot", "block").multi().args(&[a("start-slot", "integer"), a("end-slot", "integer")])]),
    Doc::new("cluster|bumpepoch", "Advance the cluster config epoch", "3.0.0", "O(1)"),
    Doc::new("cluster|count-failure-reports", "Return the number of failure reports active for a given node", "3.0.0", "O(N) where N is the number of failure reports").args(&[a("node-id", "string")]),
    Doc::new("cluster|countkeysinslot", "Return the number of local keys in the specified hash slot", "3.0.0", "O(1)").args(&[a("slot", "integer")]),
    Doc::new("cluster|delslots", "Set hash slots as unbound in receiving node", "3.0.0", "O(N) where N is the total number of hash slot arguments").args(&[a("slot", "integer").multi()]),
    Doc::new("cluster|delslotsrange", "Set hash slots as unbound in receiving node", "7.0.0", "O(N) where N is the total number of the slots between the start slot and end slot arguments.").args(&[a("start-slot_end-slot", "block").multi().args(&[a("start-slot", "integer"), a("end-slot", "integer")])]),
    Doc::new("cluster|failover", "Forces a replica to perform a manual failover of its master.", "3.0.0", "O(1)").args(&[a("options", "oneof").opt().args(&[a("force", "pure-token").tok("FORCE"), a("takeover", "pure-token").tok("TAKEOVER")])]),
    Doc::new("cluster|flushslots", "Delete a node's own slots information", "3.0.0", "O(1)"),
    Doc::new("cluster|forget", "Remove a node from the nodes table", "3.0.0", "O(1)").args(&[a("node-id", "string")]),
    Doc::new("cluster|getkeysinslot", "Return local key names in the specified hash slot", "3.0.0", "O(log(N)) where N is the number of requested keys").args(&[a("slot", "integer"), a("count", "integer")]),
    Doc::new("cluster|help", "Show helpful text about the different subcommands", "5.0.0", "O(1)"),
    Doc::new("cluster|info", "Provides info about Redis Cluster node state", "3.0.0", "O(1)"),
    Doc::new("cluster|keyslot", "Returns the hash slot of the specified key", "3.0.0", "O(N) where N is the number of bytes in the key").args(&[a("key", "string")]),
    Doc::new("cluster|links", "Returns a list of all TCP links to and from peer nodes in cluster", "7.0.0", "O(N) where N is the total number of Cluster nodes"),
    Doc::new("cluster|meet", "Force a node cluster to handshake with another node", "3.0.0", "O(1)").history(&[("4.0.0", "Added the optional `cluster_bus_port` argument.")]).args(&[a("ip", "string"), a("port", "integer"), a("cluster_bus_port", "integer").since("4.0.0").opt()]),
    Doc::new("cluster|myid", "Return the node id", "3.0.0", "O(1)"),
    Doc::new("cluster|nodes", "Get Cluster config for the node", "3.0.0", "O(N) where N is the total number of Cluster nodes"),
    Doc::new("cluster|replicas", "List replica nodes of the specified master node", "5.0.0", "O(1)").args(&[a("node-id", "string")]),
    Doc::new("cluster|replicate", "Reconfigure a node as a replica of the specified master node", "3.0.0", "O(1)").args(&[a("node-id", "string")]),
    Doc::new("cluster|reset", "Reset a Redis Cluster node", "3.0.0", "O(N) where N is the number of known nodes. The command may execute a FLUSHALL as a side effect.").args(&[a("hard_soft", "oneof").opt().args(&[a("hard", "pure-token").tok("HARD"), a("soft", "pure-token").tok("SOFT")])]),
    Doc::new("cluster|saveconfig", "Forces the node to save cluster state on disk", "3.0.0", "O(1)"),
    Doc::new("cluster|set-config-epoch", "Set the configuration epoch in a new node", "3.0.0", "O(1)").args(&[a("config-epoch", "integer")]),
    Doc::new("cluster|setslot", "Bind a hash slot to a specific node", "3.0.0", "O(1)").args(&[a("slot", "integer"), a("subcommand", "oneof").args(&[a("node-id", "string").tok("IMPORTING"), a("node-id", "string").tok("MIGRATING"), a("node-id", "string").tok("NODE"), a("stable", "pure-token").tok("STABLE")])]),
    Doc::new("cluster|shards", "Get array of cluster slots to node mappings", "7.0.0", "O(N) where N is the total number of cluster nodes"),
    Doc::new("cluster|slaves", "List replica nodes of the specified master node", "3.0.0", "O(1)").flags(DEPRECATED).deprecated("5.0.0", "`CLUSTER REPLICAS`").args(&[a("node-id", "string")]),
    Doc::new("cluster|slots", "Get array of Cluster slot to node mappings", "3.0.0", "O(N) where N is the total number of Cluster nodes").flags(DEPRECATED).deprecated("7.0.0", "`CLUSTER SHARDS`").history(&[("4.0.0", "Added node IDs."), ("7.0.0", "Added additional networking metadata field.")]),
    Doc::new("command", "Get array of Redis command details", "2.8.13", "O(N) where N is the total number of Redis commands"),
    Doc::new("command|count", "Get total number of Redis commands", "2.8.13", "O(1)"),
    Doc::new("command|docs", "Get array of specific Redis command documentation", "7.0.0", "O(N) where N is the number of commands to look up").args(&[a("command-name", "string").opt().multi()]),
    Doc::new("command|getkeys", "Extract keys given a full Redis command", "2.8.13", "O(N) where N is the number of arguments to the command"),
    Doc::new("command|getkeysandflags", "Extract keys and access flags given a full Redis command", "7.0.0", "O(N) where N is the number of arguments to the command"),
    Doc::new("command|help", "Show helpful text about the different subcommands", "5.0.0", "O(1)"),
    Doc::new("command|info", "Get array of specific Redis command details, or all when no argument is given.", "2.8.13", "O(N) where N is the number of commands to look up").history(&[("7.0.0", "Allowed to be called with no argument to get info on all commands.")]).args(&[a("command-name", "string").opt().multi()]),
    Doc::new("command|list", "Get an array of Redis command names", "7.0.0", "O(N) where N is the total number of Redis commands").args(&[a("filterby", "oneof").tok("FILTERBY").opt().args(&[a("module-name", "string").tok("MODULE"), a("category", "string").tok("ACLCAT"), a("pattern", "pattern").tok("PATTERN")])]),
    Doc::new("config", "A container for server configuration commands", "2.0.0", "Depends on subcommand."),
    Doc::new("config|get", "Get the values of configuration parameters", "2.0.0", "O(N) when N is the number of configuration parameters provided").history(&[("7.0.0", "Added the ability to pass multiple pattern parameters in one call")]).args(&[a("parameter", "block").multi().args(&[a("parameter", "string")])]),
    Doc::new("config|help", "Show helpful text about the different subcommands", "5.0.0", "O(1)"),
    Doc::new("config|resetstat", "Reset the stats returned by INFO", "2.0.0", "O(1)"),
    Doc::new("config|rewrite", "Rewrite the configuration file with the in memory configuration", "2.8.0", "O(1)"),
    Doc::new("config|set", "Set configuration parameters to the given values", "2.0.0", "O(N) when N is the number of configuration parameters provided").history(&[("7.0.0", "Added the ability to set multiple parameters in one call.")]).args(&[a("parameter_value", "block").multi().args(&[a("parameter", "string"), a("value", "string")])]),
    Doc::new("copy", "Copy a key", "6.2.0", "O(N) worst case for collections, where N is the number of nested items. O(1) for string values.").args(&[a("source", "key").key(0), a("destination", "key").key(1), a("destination-db", "integer").tok("DB").opt(), a("replace", "pure-token").tok("REPLACE").opt()]),
    Doc::new("dbsize", "Return the number of keys in the selected database", "1.0.0", "O(1)"),
    Doc::new("debug", "A container for debugging commands", "1.0.0", "Depends on subcommand.").flags(SYSCMD),
    Doc::new("decr", "Decrement the integer value of a key by one", "1.0.0", "O(1)").args(&[a("key", "key").key(0)]),
    Doc::new("decrby", "Decrement the integer value of a key by the given number", "1.0.0", "O(1)").args(&[a("key", "key").key(0), a("decrement", "integer")]),
    Doc::new("del", "Delete a key", "1.0.0", "O(N) where N is the number of keys that will be removed. When a key to remove holds a value other than a string, the individual complexity for this key is O(M) where M is the number of elements in the list, set, sorted set or hash. Removing a single key that holds a string value is O(1).").args(&[a("key", "key").key(0).multi()]),
    Doc::new("discard", "Discard all commands issued after MULTI", "2.0.0", "O(N), when N is the number of queued commands"),
    Doc::new("dump", "Return a serialized version of the value stored at the specified key.", "2.6.0", "O(1) to access the key and additional O(N*M) to serialize it, where N is the number of Redis objects composing the value and M their average size. For small string values the time complexity is thus O(1)+O(1*M) where M is small, so simply O(1).").args(&[a("key", "key").key(0)]),
    Doc::new("echo", "Echo the given string", "1.0.0", "O(1)").args(&[a("message", "string")]),
    Doc::new("eval", "Execute a Lua script server side", "2.6.0", "Depends on the script that is executed.").args(&[a("script", "string"), a("numkeys", "integer"), a("key", "key").key(0).opt().multi(), a("arg", "string").opt().multi()]),
    Doc::new("eval_ro", "Execute a read-only Lua script server side", "7.0.0", "Depends on the script that is executed.").args(&[a("script", "string"), a("numkeys", "integer"), a("key", "key").key(0).opt().multi(), a("arg", "string").opt().multi()]),
    Doc::new("evalsha", "Execute a Lua script server side", "2.6.0", "Depends on the script that is executed.").args(&[a("sha1", "string"), a("numkeys", "integer"), a("key", "key").key(0).opt().multi(), a("arg", "string").opt().multi()]),
    Doc::new("evalsha_ro", "Execute a read-only Lua script server side", "7.0.0", "Depends on the script that is executed.").args(&[a("sha1", "string"), a("numkeys", "integer"), a("key", "key").key(0).opt().multi(), a("arg", "string").opt().multi()]),
    Doc::new("exec", "Execute all commands issued after MULTI", "1.2.0", "Depends on commands in the transaction"),
    Doc::new("exists", "Determine if a key exists", "1.0.0", "O(N) where N is the number of keys to check.").history(&[("3.0.3", "Accepts multiple `key` arguments.")]).args(&[a("key", "key").key(0).multi()]),
    Doc::new("expire", "Set a key's time to live in seconds", "1.0.0", "O(1)").history(&[("7.0.0", "Added options: `NX`, `XX`, `GT` and `LT`.")]).args(&[a("key", "key").key(0), a("seconds", "integer"), a("condition", "oneof").since("7.0.0").opt().args(&[a("nx", "pure-token").tok("NX"), a("xx", "pure-token").tok("XX"), a("gt", "pure-token").tok("GT"), a("lt", "pure-token").tok("LT")])]),
    Doc::new("expireat", "Set the expiration for a key as a UNIX timestamp", "1.2.0", "O(1)").history(&[("7.0.0", "Added options: `NX`, `XX`, `GT` and `LT`.")]).args(&[a("key", "key").key(0), a("unix-time-seconds", "unix-time"), a("condition", "oneof").since("7.0.0").opt().args(&[a("nx", "pure-token").tok("NX"), a("xx", "pure-token").tok("XX"), a("gt", "pure-token").tok("GT"), a("lt", "pure-token").tok("LT")])]),
    Doc::new("expiretime", "Get the expiration Unix timestamp for a key", "7.0.0", "O(1)").args(&[a("key", "key").key(0)]),
    Doc::new("failover", "Start a coordinated failover between this server and one of its replicas.", "6.2.0", "O(1)").args(&[a("target", "block").tok("TO").opt().args(&[a("host", "string"), a("port", "integer"), a("force", "pure-token").tok("FORCE").opt()]), a("abort", "pure-token").tok("ABORT").opt(), a("milliseconds", "integer").tok("TIMEOUT").opt()]),
    Doc::new("fcall", "Invoke a function", "7.0.0", "Depends on the function that is executed.").args(&[a("function", "string"), a("numkeys", "integer"), a("key", "key").key(0).opt().multi(), a("arg", "string").opt().multi()]),
    Doc::new("fcall_ro", "Invoke a read-only function", "7.0.0", "Depends on the function that is executed.").args(&[a("function", "string"), a("numkeys", "integer"), a("key", "key").key(0).opt().multi(), a("arg", "string").opt().multi()]),
    Doc::new("flushall", "Remove all keys from all databases", "1.0.0", "O(N) where N is the total number of keys in all databases").history(&[("4.0.0", "Added the `ASYNC` flushing mode modifier."), ("6.2.0", "Added the `SYNC` flushing mode modifier.")]).args(&[a("async", "oneof").opt().args(&[a("async", "pure-token").tok("ASYNC").since("4.0.0"), a("sync", "pure-token").tok("SYNC").since("6.2.0")])]),
    Doc::new("flushdb", "Remove all keys from the current database", "1.0.0", "O(N) where N is the number of keys in the selected database").history(&[("4.0.0", "Added the `ASYNC` flushing mode modifier."), ("6.2.0", "Added the `SYNC` flushing mode modifier.")]).args(&[a("async", "oneof").opt().args(&[a("async", "pure-token").tok("ASYNC").since("4.0.0"), a("sync", "pure-token").tok("SYNC").since("6.2.0")])]),
    Doc::new("function", "A container for function commands", "7.0.0", "Depends on subcommand."),
    Doc::new("function|delete", "Delete a function by name", "7.0.0", "O(1)").args(&[a("library-name", "string")]),
    Doc::new("function|dump", "Dump all functions into a serialized binary payload", "7.0.0", "O(N) where N is the number of functions"),
    Doc::new("function|flush", "Deleting all functions", "7.0.0", "O(N) where N is the number of functions deleted").args(&[a("async", "oneof").opt().args(&[a("async", "pure-token").tok("ASYNC"), a("sync", "pure-token").tok("SYNC")])]),
    Doc::new("function|help", "Show helpful text about the different subcommands", "7.0.0", "O(1)"),
    Doc::new("function|kill", "Kill the function currently in execution.", "7.0.0", "O(1)"),
    Doc::new("function|list", "List information about all the functions", "7.0.0", "O(N) where N is the number of functions").args(&[a("library-name-pattern", "string").tok("LIBRARYNAME").opt(), a("withcode", "pure-token").tok("WITHCODE").opt()]),
    Doc::new("function|load", "Create a function with the given arguments (name, code, description)", "7.0.0", "O(1) (considering compilation time is redundant)").args(&[a("replace", "pure-token").tok("REPLACE").opt(), a("function-code", "string")]),
    Doc::new("function|restore", "Restore all the functions on the given payload", "7.0.0", "O(N) where N is the number of functions on the payload").args(&[a("serialized-value", "string"), a("policy", "oneof").opt().args(&[a("flush", "pure-token").tok("FLUSH"), a("append", "pure-token").tok("APPEND"), a("replace", "pure-token").tok("REPLACE")])]),
    Doc::new("function|stats", "Return information about the function currently running (name, description, duration)", "7.0.0", "O(1)"),
    Doc::new("geoadd", "Add one or more geospatial items in the geospatial index represented using a sorted set", "3.2.0", "O(log(N)) for each item added, where N is the number of elements in the sorted set.").history(&[("6.2.0", "Added the `CH`, `NX` and `XX` options.")]).args(&[a("key", "key").key(0), a("condition", "oneof").since("6.2.0").opt().args(&[a("nx", "pure-token").tok("NX"), a("xx", "pure-token").tok("XX")]), a("change", "pure-token").tok("CH").since("6.2.0").opt(), a("longitude_latitude_member", "block").multi().args(&[a("longitude", "double"), a("latitude", "double"), a("member", "string")])]),
    Doc::new("geodist", "Returns the distance between two members of a geospatial index", "3.2.0", "O(log(N))").args(&[a("key", "key").key(0), a("member1", "string"), a("member2", "string"), a("unit", "oneof").opt().args(&[a("m", "pure-token").tok("M"), a("km", "pure-token").tok("KM"), a("ft", "pure-token").tok("FT"), a("mi", "pure-token").tok("MI")])]),
    Doc::new("geohash", "Returns members of a geospatial index as standard geohash strings", "3.2.0", "O(log(N)) for each member requested, where N is the number of elements in the sorted set.").args(&[a("key", "key").key(0), a("member", "string").multi()]),
    Doc::new("geopos", "Returns longitude and latitude of members of a geospatial index", "3.2.0", "O(N) where N is the number of members requested.").args(&[a("key", "key").key(0), a("member", "string").multi()]),
    Doc::new("georadius", "Query a sorted set representing a geospatial index to fetch members matching a given maximum distance from a point", "3.2.0", "O(N+log(M)) where N is the number of elements inside the bounding box of the circular area delimited by center and radius and M is the number of items inside the index.").flags(DEPRECATED).deprecated("6.2.0", "`GEOSEARCH` and `GEOSEARCHSTORE` with the `BYRADIUS` argument").history(&[("6.2.0", "Added the `ANY` option for `COUNT`."), ("7.0.0", "Added support for uppercase unit names.")]).args(&[a("key", "key").key(0), a("longitude", "double"), a("latitude", "double"), a("radius", "double"), a("unit", "oneof").args(&[a("m", "pure-token").tok("M"), a("km", "pure-token").tok("KM"), a("ft", "pure-token").tok("FT"), a("mi", "pure-token").tok("MI")]), a("withcoord", "pure-token").tok("WITHCOORD").opt(), a("withdist", "pure-token").tok("WITHDIST").opt(), a("withhash", "pure-token").tok("WITHHASH").opt(), a("count", "block").opt().args(&[a("count", "integer").tok("COUNT"), a("any", "pure-token").tok("ANY").since("6.2.0").opt()]), a("order", "oneof").opt().args(&[a("asc", "pure-token").tok("ASC"), a("desc", "pure-token").tok("DESC")]), a("key", "key").key(1).tok("STORE").opt(), a("key", "key").key(2).tok("STOREDIST").opt()]),
    Doc::new("georadius_ro", "A read-only variant for GEORADIUS", "3.2.10", "O(N+log(M)) where N is the number of elements inside the bounding box of the circular area delimited by center and radius and M is the number of items inside the index.").flags(DEPRECATED).deprecated("6.2.0", "`GEOSEARCH` with the `BYRADIUS` argument").history(&[("6.2.0", "Added the `ANY` option for `COUNT`.")]).args(&[a("key", "key").key(0), a("longitude", "double"), a("latitude", "double"), a("radius", "double"), a("unit", "oneof").args(&[a("m", "pure-token").tok("M"), a("km", "pure-token").tok("KM"), a("ft", "pure-token").tok("FT"), a("mi", "pure-token").tok("MI")]), a("withcoord", "pure-token").tok("WITHCOORD").opt(), a("withdist", "pure-token").tok("WITHDIST").opt(), a("withhash", "pure-token").tok("WITHHASH").opt(), a("count", "block").opt().args(&[a("count", "integer").tok("COUNT"), a("any", "pure-token").tok("ANY").since("6.2.0").opt()]), a("order", "oneof").opt().args(&[a("asc", "pure-token").tok("ASC"), a("desc", "pure-token").tok("DESC")])]),
    Doc::new("georadiusbymember", "Query a sorted set representing a geospatial index to fetch members matching a given maximum distance from a member", "3.2.0", "O(N+log(M)) where N is the number of elements inside the bounding box of the circular area delimited by center and radius and M is the number of items inside the index.").flags(DEPRECATED).deprecated("6.2.0", "`GEOSEARCH` and `GEOSEARCHSTORE` with the `BYRADIUS` and `FROMMEMBER` arguments").history(&[("7.0.0", "Added support for uppercase unit names.")]).args(&[a("key", "key").key(0), a("member", "string"), a("radius", "double"), a("unit", "oneof").args(&[a("m", "pure-token").tok("M"), a("km", "pure-token").tok("KM"), a("ft", "pure-token").tok("FT"), a("mi", "pure-token").tok("MI")]), a("withcoord", "pure-token").tok("WITHCOORD").opt(), a("withdist", "pure-token").tok("WITHDIST").opt(), a("withhash", "pure-token").tok("WITHHASH").opt(), a("count", "block").opt().args(&[a("count", "integer").tok("COUNT"), a("any", "pure-token").tok("ANY").opt()]), a("order", "oneof").opt().args(&[a("asc", "pure-token").tok("ASC"), a("desc", "pure-token").tok("DESC")]), a("key", "key").key(1).tok("STORE").opt(), a("key", "key").key(2).tok("STOREDIST").opt()]),
    Doc::new("georadiusbymember_ro", "A read-only variant for GEORADIUSBYMEMBER", "3.2.10", "O(N+log(M)) where N is the number of elements inside the bounding box of the circular area delimited by center and radius and M is the number of items inside the index.").flags(DEPRECATED).deprecated("6.2.0", "`GEOSEARCH` with the `BYRADIUS` and `FROMMEMBER` arguments").args(&[a("key", "key").key(0), a("member", "string"), a("radius", "double"), a("unit", "oneof").args(&[a("m", "pure-token").tok("M"), a("km", "pure-token").tok("KM"), a("ft", "pure-token").tok("FT"), a("mi", "pure-token").tok("MI")]), a("withcoord", "pure-token").tok("WITHCOORD").opt(), a("withdist", "pure-token").tok("WITHDIST").opt(), a("withhash", "pure-token").tok("WITHHASH").opt(), a("count", "block").opt().args(&[a("count", "integer").tok("COUNT"), a("any", "pure-token").tok("ANY").opt()]), a("order", "oneof").opt().args(&[a("asc", "pure-token").tok("ASC"), a("desc", "pure-token").tok("DESC")])]),
    Doc::new("geosearch", "Query a sorted set representing a geospatial index to fetch members inside an area of a box or a circle.", "6.2.0", "O(N+log(M)) where N is the number of elements in the grid-aligned bounding box area around the shape provided as the filter and M is the number of items inside the shape").history(&[("7.0.0", "Added support for uppercase unit names.")]).args(&[a("key", "key").key(0), a("from", "oneof").args(&[a("member", "string").tok("FROMMEMBER"), a("longitude_latitude", "block").tok("FROMLONLAT").args(&[a("longitude", "double"), a("latitude", "double")])]), a("by", "oneof").args(&[a("circle", "block").args(&[a("radius", "double").tok("BYRADIUS"), a("unit", "oneof").args(&[a("m", "pure-token").tok("M"), a("km", "pure-token").tok("KM"), a("ft", "pure-token").tok("FT"), a("mi", "pure-token").tok("MI")])]), a("box", "block").args(&[a("width", "double").tok("BYBOX"), a("height", "double"), a("unit", "oneof").args(&[a("m", "pure-token").tok("M"), a("km", "pure-token").tok("KM"), a("ft", "pure-token").tok("FT"), a("mi", "pure-token").tok("MI")])])]), a("order", "oneof").opt().args(&[a("asc", "pure-token").tok("ASC"), a("desc", "pure-token").tok("DESC")]), a("count", "block").opt().args(&[a("count", "integer").tok("COUNT"), a("any", "pure-token").tok("ANY").opt()]), a("withcoord", "pure-token").tok("WITHCOORD").opt(), a("withdist", "pure-token").tok("WITHDIST").opt(), a("withhash", "pure-token").tok("WITHHASH").opt()]),
    Doc::new("geosearchstore", "Query a sorted set representing a geospatial index to fetch members inside an area of a box or a circle, and store the result in another key.", "6.2.0", "O(N+log(M)) where N is the number of elements in the grid-aligned bounding box area around the shape provided as the filter and M is the number of items inside the shape").history(&[("7.0.0", "Added support for uppercase unit names.")]).args(&[a("destination", "key").key(0), a("source", "key").key(1), a("from", "oneof").args(&[a("member", "string").tok("FROMMEMBER"), a("longitude_latitude", "block").tok("FROMLONLAT").args(&[a("longitude", "double"), a("latitude", "double")])]), a("by", "oneof").args(&[a("circle", "block").args(&[a("radius", "double").tok("BYRADIUS"), a("unit", "oneof").args(&[a("m", "pure-token").tok("M"), a("km", "pure-token").tok("KM"), a("ft", "pure-token").tok("FT"), a("mi", "pure-token").tok("MI")])]), a("box", "block").args(&[a("width", "double").tok("BYBOX"), a("height", "double"), a("unit", "oneof").args(&[a("m", "pure-token").tok("M"), a("km", "pure-token").tok("KM"), a("ft", "pure-token").tok("FT"), a("mi", "pure-token").tok("MI")])])]), a("order", "oneof").opt().args(&[a("asc", "pure-token").tok("ASC"), a("desc", "pure-token").tok("DESC")]), a("count", "block").opt().args(&[a("count", "integer").tok("COUNT"), a("any", "pure-token").tok("ANY").opt()]), a("storedist", "pure-token").tok("STOREDIST").opt()]),
    Doc::new("get", "Get the value of a key", "1.0.0", "O(1)").args(&[a("key", "key").key(0)]),
    Doc::new("getbit", "Returns the bit value at offset in the string value stored at key", "2.2.0", "O(1)").args(&[a("key", "key").key(0), a("offset", "integer")]),
    Doc::new("getdel", "Get the value of a key and delete the key", "6.2.0", "O(1)").args(&[a("key", "key").key(0)]),
    Doc::new("getex", "Get the value of a key and optionally set its expiration", "6.2.0", "O(1)").args(&[a("key", "key").key(0), a("expiration", "oneof").opt().args(&[a("seconds", "integer").tok("EX"), a("milliseconds", "integer").tok("PX"), a("unix-time-seconds", "unix-time").tok("EXAT"), a("unix-time-milliseconds", "unix-time").tok("PXAT"), a("persist", "pure-token").tok("PERSIST")])]),
    Doc::new("getrange", "Get a substring of the string stored at a key", "2.4.0", "O(N) where N is the length of the returned string. The complexity is ultimately determined by the returned length, but because creating a substring from an existing string is very cheap, it can be considered O(1) for small strings.").args(&[a("key", "key").key(0), a("start", "integer"), a("end", "integer")]),
    Doc::new("getset", "Set the string value of a key and return its old value", "1.0.0", "O(1)").flags(DEPRECATED).deprecated("6.2.0", "`SET` with the `!GET` argument").args(&[a("key", "key").key(0), a("value", "string")]),
    Doc::new("hdel", "Delete one or more hash fields", "2.0.0", "O(N) where N is the number of fields to be removed.").history(&[("2.4.0", "Accepts multiple `field` arguments.")]).args(&[a("key", "key").key(0), a("field", "string").multi()]),
    Doc::new("hello", "Handshake with Redis", "6.0.0", "O(1)").history(&[("6.2.0", "`protover` made optional; when called without arguments the command reports the current connection's context.")]).args(&[a("arguments", "block").opt().args(&[a("protover", "integer"), a("username_password", "block").tok("AUTH").opt().args(&[a("username", "string"), a("password", "string")]), a("clientname", "string").tok("SETNAME").opt()])]),
    Doc::new("hexists", "Determine if a hash field exists", "2.0.0", "O(1)").args(&[a("key", "key").key(0), a("field", "string")]),
    Doc::new("hget", "Get the value of a hash field", "2.0.0", "O(1)").args(&[a("key", "key").key(0), a("field", "string")]),
    Doc::new("hgetall", "Get all the fields and values in a hash", "2.0.0", "O(N) where N is the size of the hash.").args(&[a("key", "key").key(0)]),
    Doc::new("hincrby", "Increment the integer value of a hash field by the given number", "2.0.0", "O(1)").args(&[a("key", "key").key(0), a("field", "string"), a("increment", "integer")]),
    Doc::new("hincrbyfloat", "Increment the float value of a hash field by the given amount", "2.6.0", "O(1)").args(&[a("key", "key").key(0), a("field", "string"), a("increment", "double")]),
    Doc::new("hkeys", "Get all the fields in a hash", "2.0.0", "O(N) where N is the size of the hash.").args(&[a("key", "key").key(0)]),
    Doc::new("hlen", "Get the number of fields in a hash", "2.0.0", "O(1)").args(&[a("key", "key").key(0)]),
    Doc::new("hmget", "Get the values of all the given hash fields", "2.0.0", "O(N) where N is the number of fields being requested.").args(&[a("key", "key").key(0), a("field", "string").multi()]),
    Doc::new("hmset", "Set multiple hash fields to multiple values", "2.0.0", "O(N) where N is the number of fields being set.").flags(DEPRECATED).deprecated("4.0.0", "`HSET` with multiple field-value pairs").args(&[a("key", "key").key(0), a("field_value", "block").multi().args(&[a("field", "string"), a("value", "string")])]),
    Doc::new("hrandfield", "Get one or multiple random fields from a hash", "6.2.0", "O(N) where N is the number of fields returned").args(&[a("key", "key").key(0), a("options", "block").opt().args(&[a("count", "integer"), a("withvalues", "pure-token").tok("WITHVALUES").opt()])]),
    Doc::new("hscan", "Incrementally iterate hash fields and associated values", "2.8.0", "O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection..").args(&[a("key", "key").key(0), a("cursor", "integer"), a("pattern", "pattern").tok("MATCH").opt(), a("count", "integer").tok("COUNT").opt()]),
    Doc::new("hset", "Set the string value of a hash field", "2.0.0", "O(1) for each field/value pair added, so O(N) to add N field/value pairs when the command is called with multiple field/value pairs.").history(&[("4.0.0", "Accepts multiple `field` and `value` arguments.")]).args(&[a("key", "key").key(0), a("field_value", "block").multi().args(&[a("field", "string"), a("value", "string")])]),
    Doc::new("hsetnx", "Set the value of a hash field, only if the field does not exist", "2.0.0", "O(1)").args(&[a("key", "key").key(0), a("field", "string"), a("value", "string")]),
    Doc::new("hstrlen", "Get the length of the value of a hash field", "3.2.0", "O(1)").args(&[a("key", "key").key(0), a("field", "string")]),
    Doc::new("hvals", "Get all the values in a hash", "2.0.0", "O(N) where N is the size of the hash.").args(&[a("key", "key").key(0)]),
    Doc::new("incr", "Increment the integer value of a key by one", "1.0.0", "O(1)").args(&[a("key", "key").key(0)]),
    Doc::new("incrby", "Increment the integer value of a key by the given amount", "1.0.0", "O(1)").args(&[a("key", "key").key(0), a("increment", "integer")]),
    Doc::new("incrbyfloat", "Increment the float value of a key by the given amount", "2.6.0", "O(1)").args(&[a("key", "key").key(0), a("increment", "double")]),
    Doc::new("info", "Get information and statistics about the server", "1.0.0", "O(1)").history(&[("7.0.0", "Added support for taking multiple section arguments.")]).args(&[a("section", "string").opt().multi()]),
    Doc::new("keys", "Find all keys matching the given pattern", "1.0.0", "O(N) with N being the number of keys in the database, under the assumption that the key names in the database and the given pattern have limited length.").args(&[a("pattern", "pattern")]),
    Doc::new("lastsave", "Get the UNIX time stamp of the last successful save to disk", "1.0.0", "O(1)"),
    Doc::new("latency", "A container for latency diagnostics commands", "2.8.13", "Depends on subcommand."),
    Doc::new("latency|doctor", "Return a human readable latency analysis report.", "2.8.13", "O(1)"),
    Doc::new("latency|graph", "Return a latency graph for the event.", "2.8.13", "O(1)").args(&[a("event", "string")]),
    Doc::new("latency|help", "Show helpful text about the different subcommands.", "2.8.13", "O(1)"),
    Doc::new("latency|histogram", "Return the cumulative distribution of latencies of a subset of commands or all.", "7.0.0", "O(N) where N is the number of commands with latency information being retrieved.").args(&[a("command", "string").opt().multi()]),
    Doc::new("latency|history", "Return timestamp-latency samples for the event.", "2.8.13", "O(1)").args(&[a("event", "string")]),
    Doc::new("latency|latest", "Return the latest latency samples for all events.", "2.8.13", "O(1)"),
    Doc::new("latency|reset", "Reset latency data for one or more events.", "2.8.13", "O(1)").args(&[a("event", "string").opt().multi()]),
    Doc::new("lcs", "Find longest common substring", "7.0.0", "O(N*M) where N and M are the lengths of s1 and s2, respectively").args(&[a("key1", "key").key(0), a("key2", "key").key(0), a("len", "pure-token").tok("LEN").opt(), a("idx", "pure-token").tok("IDX").opt(), a("len", "integer").tok("MINMATCHLEN").opt(), a("withmatchlen", "pure-token").tok("WITHMATCHLEN").opt()]),
    Doc::new("lindex", "Get an element from a list by its index", "1.0.0", "O(N) where N is the number of elements to traverse to get to the element at index. This makes asking for the first or the last element of the list O(1).").args(&[a("key", "key").key(0), a("index", "integer")]),
    Doc::new("linsert", "Insert an element before or after another element in a list", "2.2.0", "O(N) where N is the number of elements to traverse before seeing the value pivot. This means that inserting somewhere on the left end on the list (head) can be considered O(1) and inserting somewhere on the right end (tail) is O(N).").args(&[a("key", "key").key(0), a("where", "oneof").args(&[a("before", "pure-token").tok("BEFORE"), a("after", "pure-token").tok("AFTER")]), a("pivot", "string"), a("element", "string")]),
    Doc::new("llen", "Get the length of a list", "1.0.0", "O(1)").args(&[a("key", "key").key(0)]),
    Doc::new("lmove", "Pop an element from a list, push it to another list and return it", "6.2.0", "O(1)").args(&[a("source", "key").key(0), a("destination", "key").key(1), a("wherefrom", "oneof").args(&[a("left", "pure-token").tok("LEFT"), a("right", "pure-token").tok("RIGHT")]), a("whereto", "oneof").args(&[a("left", "pure-token").tok("LEFT"), a("right", "pure-token").tok("RIGHT")])]),
    Doc::new("lmpop", "Pop elements from a list", "7.0.0", "O(N+M) where N is the number of provided keys and M is the number of elements returned.").args(&[a("numkeys", "integer"), a("key", "key").key(0).multi(), a("where", "oneof").args(&[a("left", "pure-token").tok("LEFT"), a("right", "pure-token").tok("RIGHT")]), a("count", "integer").tok("COUNT").opt()]),
    Doc::new("lolwut", "Display some computer art and the Redis version", "5.0.0", "").args(&[a("version", "integer").tok("VERSION").opt()]),
    Doc::new("lpop", "Remove and get the first elements in a list", "1.0.0", "O(N) where N is the number of elements returned").history(&[("6.2.0", "Added the `count` argument.")]).args(&[a("key", "key").key(0), a("count", "integer").since("6.2.0").opt()]),
    Doc::new("lpos", "Return the index of matching elements on a list", "6.0.6", "O(N) where N is the number of elements in the list, for the average case. When searching for elements near the head or the tail of the list, or when the MAXLEN option is provided, the command may run in constant time.").args(&[a("key", "key").key(0), a("element", "string"), a("rank", "integer").tok("RANK").opt(), a("num-matches", "integer").tok("COUNT").opt(), a("len", "integer").tok("MAXLEN").opt()]),
    Doc::new("lpush", "Prepend one or multiple elements to a list", "1.0.0", "O(1) for each element added, so O(N) to add N elements when the command is called with multiple arguments.").history(&[("2.4.0", "Accepts multiple `element` arguments.")]).args(&[a("key", "key").key(0), a("element", "string").multi()]),
    Doc::new("lpushx", "Prepend an element to a list, only if the list exists", "2.2.0", "O(1) for each element added, so O(N) to add N elements when the command is called with multiple arguments.").history(&[("4.0.0", "Accepts multiple `element` arguments.")]).args(&[a("key", "key").key(0), a("element", "string").multi()]),
    Doc::new("lrange", "Get a range of elements from a list", "1.0.0", "O(S+N) where S is the distance of start offset from HEAD for small lists, from nearest end (HEAD or TAIL) for large lists; and N is the number of elements in the specified range.").args(&[a("key", "key").key(0), a("start", "integer"), a("stop", "integer")]),
    Doc::new("lrem", "Remove elements from a list", "1.0.0", "O(N+M) where N is the length of the list and M is the number of elements removed.").args(&[a("key", "key").key(0), a("count", "integer"), a("element", "string")]),
    Doc::new("lset", "Set the value of an element in a list by its index", "1.0.0", "O(N) where N is the length of the list. Setting either the first or the last element of the list is O(1).").args(&[a("key", "key").key(0), a("index", "integer"), a("element", "string")]),
    Doc::new("ltrim", "Trim a list to the specified range", "1.0.0", "O(N) where N is the number of elements to be removed by the operation.").args(&[a("key", "key").key(0), a("start", "integer"), a("stop", "integer")]),
    Doc::new("memory", "A container for memory diagnostics commands", "4.0.0", "Depends on subcommand."),
    Doc::new("memory|doctor", "Outputs memory problems report", "4.0.0", "O(1)"),
    Doc::new("memory|help", "Show helpful text about the different subcommands", "4.0.0", "O(1)"),
    Doc::new("memory|malloc-stats", "Show allocator internal stats", "4.0.0", "Depends on how much memory is allocated, could be slow"),
    Doc::new("memory|purge", "Ask the allocator to release memory", "4.0.0", "Depends on how much memory is allocated, could be slow"),
    Doc::new("memory|stats", "Show memory usage details", "4.0.0", "O(1)"),
    Doc::new("memory|usage", "Estimate the memory usage of a key", "4.0.0", "O(N) where N is the number of samples.").args(&[a("key", "key").key(0), a("count", "integer").tok("SAMPLES").opt()]),
    Doc::new("mget", "Get the values of all the given keys", "1.0.0", "O(N) where N is the number of keys to retrieve.").args(&[a("key", "key").key(0).multi()]),
    Doc::new("migrate", "Atomically transfer a key from a Redis instance to another one.", "2.6.0", "This command actually executes a DUMP+DEL in the source instance, and a RESTORE in the target instance. See the pages of these commands for time complexity. Also an O(N) data transfer between the two instances is performed.").history(&[("3.0.0", "Added the `COPY` and `REPLACE` options."), ("3.0.6", "Added the `KEYS` option."), ("4.0.7", "Added the `AUTH` option."), ("6.0.0", "Added the `AUTH2` option.")]).args(&[a("host", "string"), a("port", "integer"), a("key_or_empty_string", "oneof").args(&[a("key", "key").key(0), a("empty_string", "pure-token").tok("")]), a("destination-db", "integer"), a("timeout", "integer"), a("copy", "pure-token").tok("COPY").since("3.0.0").opt(), a("replace", "pure-token").tok("REPLACE").since("3.0.0").opt(), a("authentication", "oneof").opt().args(&[a("password", "string").tok("AUTH").since("4.0.7").opt(), a("username_password", "block").tok("AUTH2").since("6.0.0").opt().args(&[a("username", "string"), a("password", "string")])]), a("key", "key").key(1).tok("KEYS").since("3.0.6").opt().multi()]),
    Doc::new("module", "A container for module commands", "4.0.0", "Depends on subcommand."),
    Doc::new("module|help", "Show helpful text about the different subcommands", "5.0.0", "O(1)"),
    Doc::new("module|list", "List all modules loaded by the server", "4.0.0", "O(N) where N is the number of loaded modules."),
    Doc::new("module|load", "Load a module", "4.0.0", "O(1)").args(&[a("path", "string"), a("arg", "string").opt().multi()]),
    Doc::new("module|loadex", "Load a module with extended parameters", "7.0.0", "O(1)").args(&[a("path", "string"), a("configs", "block").tok("CONFIG").opt().multi().multi_tok().args(&[a("name", "string"), a("value", "string")]), a("args", "block").tok("ARGS").opt().multi().args(&[a("arg", "string")])]),
    Doc::new("module|unload", "Unload a module", "4.0.0", "O(1)").args(&[a("name", "string")]),
    Doc::new("monitor", "Listen for all requests received by the server in real time", "1.0.0", ""),
    Doc::new("move", "Move a key to another database", "1.0.0", "O(1)").args(&[a("key", "key").key(0), a("db", "integer")]),
    Doc::new("mset", "Set multiple keys to multiple values", "1.0.1", "O(N) where N is the number of keys to set.").args(&[a("key_value", "block").multi().args(&[a("key", "key").key(0), a("value", "string")])]),
    Doc::new("msetnx", "Set multiple keys to multiple values, only if none of the keys exist", "1.0.1", "O(N) where N is the number of keys to set.").args(&[a("key_value", "block").multi().args(&[a("key", "key").key(0), a("value", "string")])]),
    Doc::new("multi", "Mark the start of a transaction block", "1.2.0", "O(1)"),
    Doc::new("object", "A container for object introspection commands", "2.2.3", "Depends on subcommand."),
    Doc::new("object|encoding", "Inspect the internal encoding of a Redis object", "2.2.3", "O(1)").args(&[a("key", "key").key(0)]),
    Doc::new("object|freq", "Get the logarithmic access frequency counter of a Redis object", "4.0.0", "O(1)").args(&[a("key", "key").key(0)]),
    Doc::new("object|help", "Show helpful text about the different subcommands", "6.2.0", "O(1)"),
    Doc::new("object|idletime", "Get the time since a Redis object was last accessed", "2.2.3", "O(1)").args(&[a("key", "key").key(0)]),
    Doc::new("object|refcount", "Get the number of references to the value of the key", "2.2.3", "O(1)").args(&[a("key", "key").key(0)]),
    Doc::new("persist", "Remove the expiration from a key", "2.2.0", "O(1)").args(&[a("key", "key").key(0)]),
    Doc::new("pexpire", "Set a key's time to live in milliseconds", "2.6.0", "O(1)").history(&[("7.0.0", "Added options: `NX`, `XX`, `GT` and `LT`.")]).args(&[a("key", "key").key(0), a("milliseconds", "integer"), a("condition", "oneof").since("7.0.0").opt().args(&[a("nx", "pure-token").tok("NX"), a("xx", "pure-token").tok("XX"), a("gt", "pure-token").tok("GT"), a("lt", "pure-token").tok("LT")])]),
    Doc::new("pexpireat", "Set the expiration for a key as a UNIX timestamp specified in milliseconds", "2.6.0", "O(1)").history(&[("7.0.0", "Added options: `NX`, `XX`, `GT` and `LT`.")]).args(&[a("key", "key").key(0), a("unix-time-milliseconds", "unix-time"), a("condition", "oneof").since("7.0.0").opt().args(&[a("nx", "pure-token").tok("NX"), a("xx", "pure-token").tok("XX"), a("gt", "pure-token").tok("GT"), a("lt", "pure-token").tok("LT")])]),
    Doc::new("pexpiretime", "Get the expiration Unix timestamp for a key in milliseconds", "7.0.0", "O(1)").args(&[a("key", "key").key(0)]),
    Doc::new("pfadd", "Adds the specified elements to the specified HyperLogLog.", "2.8.9", "O(1) to add every element.").args(&[a("key", "key").key(0), a("element", "string").opt().multi()]),
    Doc::new("pfcount", "Return the approximated cardinality of the set(s) observed by the HyperLogLog at key(s).", "2.8.9", "O(1) with a very small average constant time when called with a single key. O(N) with N being the number of keys, and much bigger constant times, when called with multiple keys.").args(&[a("key", "key").key(0).multi()]),
    Doc::new("pfdebug", "Internal commands for debugging HyperLogLog values", "2.8.9", "N/A").flags(SYSCMD).args(&[a("subcommand", "string"), a("key", "key").key(0)]),
    Doc::new("pfmerge", "Merge N different HyperLogLogs into a single one.", "2.8.9", "O(N) to merge N HyperLogLogs, but with high constant times.").args(&[a("destkey", "key").key(0), a("sourcekey", "key").key(1).multi()]),
    Doc::new("pfselftest", "An internal command for testing HyperLogLog values", "2.8.9", "N/A").flags(SYSCMD),
    Doc::new("ping", "Ping the server", "1.0.0", "O(1)").args(&[a("message", "string").opt()]),
    Doc::new("psetex", "Set the value and expiration in milliseconds of a key", "2.6.0", "O(1)").args(&[a("key", "key").key(0), a("milliseconds", "integer"), a("value", "string")]),
    Doc::new("psubscribe", "Listen for messages published to channels matching the given patterns", "2.0.0", "O(N) where N is the number of patterns the client is already subscribed to.").args(&[a("pattern", "block").multi().args(&[a("pattern", "pattern")])]),
    Doc::new("psync", "Internal command used for replication", "2.8.0", "").args(&[a("replicationid", "string"), a("offset", "integer")]),
    Doc::new("pttl", "Get the time to live for a key in milliseconds", "2.6.0", "O(1)").history(&[("2.8.0", "Added the -2 reply.")]).args(&[a("key", "key").key(0)]),
    Doc::new("publish", "Post a message to a channel", "2.0.0", "O(N+M) where N is the number of clients subscribed to the receiving channel and M is the total number of subscribed patterns (by any client).").args(&[a("channel", "string"), a("message", "string")]),
    Doc::new("pubsub", "A container for Pub/Sub commands", "2.8.0", "Depends on subcommand."),
    Doc::new("pubsub|channels", "List active channels", "2.8.0", "O(N) where N is the number of active channels, and assuming constant time pattern matching (relatively short channels and patterns)").args(&[a("pattern", "pattern").opt()]),
    Doc::new("pubsub|help", "Show helpful text about the different subcommands", "6.2.0", "O(1)"),
    Doc::new("pubsub|numpat", "Get the count of unique patterns pattern subscriptions", "2.8.0", "O(1)"),
    Doc::new("pubsub|numsub", "Get the count of subscribers for channels", "2.8.0", "O(N) for the NUMSUB subcommand, where N is the number of requested channels").args(&[a("channel", "string").opt().multi()]),
    Doc::new("pubsub|shardchannels", "List active shard channels", "7.0.0", "O(N) where N is the number of active shard channels, and assuming constant time pattern matching (relatively short shard channels).").args(&[a("pattern", "pattern").opt()]),
    Doc::new("pubsub|shardnumsub", "Get the count of subscribers for shard channels", "7.0.0", "O(N) for the SHARDNUMSUB subcommand, where N is the number of requested shard channels").args(&[a("shardchannel", "string").opt().multi()]),
    Doc::new("punsubscribe", "Stop listening for messages posted to channels matching the given patterns", "2.0.0", "O(N+M) where N is the number of patterns the client is already subscribed and M is the number of total patterns subscribed in the system (by any client).").args(&[a("pattern", "pattern").opt().multi()]),
    Doc::new("quit", "Close the connection", "1.0.0", "O(1)"),
    Doc::new("randomkey", "Return a random key from the keyspace", "1.0.0", "O(1)"),
    Doc::new("readonly", "Enables read queries for a connection to a cluster replica node", "3.0.0", "O(1)"),
    Doc::new("readwrite", "Disables read queries for a connection to a cluster replica node", "3.0.0", "O(1)"),
    Doc::new("rename", "Rename a key", "1.0.0", "O(1)").args(&[a("key", "key").key(0), a("newkey", "key").key(1)]),
    Doc::new("renamenx", "Rename a key, only if the new key does not exist", "1.0.0", "O(1)").history(&[("3.2.0", "The command no longer returns an error when source and destination names are the same.")]).args(&[a("key", "key").key(0), a("newkey", "key").key(1)]),
    Doc::new("replconf", "An internal command for configuring the replication stream", "3.0.0", "O(1)").flags(SYSCMD),
    Doc::new("replicaof", "Make the server a replica of another instance, or promote it as master.", "5.0.0", "O(1)").args(&[a("args", "oneof").args(&[a("host-port", "block").args(&[a("host", "string"), a("port", "integer")]), a("no-one", "block").args(&[a("no", "pure-token").tok("NO"), a("one", "pure-token").tok("ONE")])])]),
    Doc::new("reset", "Reset the connection", "6.2.0", "O(1)"),
    Doc::new("restore", "Create a key using the provided serialized value, previously obtained using DUMP.", "2.6.0", "O(1) to create the new key and additional O(N*M) to reconstruct the serialized value, where N is the number of Redis objects composing the value and M their average size. For small string values the time complexity is thus O(1)+O(1*M) where M is small, so simply O(1). However for sorted set values the complexity is O(N*M*log(N)) because inserting values into sorted sets is O(log(N)).").history(&[("3.0.0", "Added the `REPLACE` modifier."), ("5.0.0", "Added the `ABSTTL` modifier."), ("5.0.0", "Added the `IDLETIME` and `FREQ` options.")]).args(&[a("key", "key").key(0), a("ttl", "integer"), a("serialized-value", "string"), a("replace", "pure-token").tok("REPLACE").since("3.0.0").opt(), a("absttl", "pure-token").tok("ABSTTL").since("5.0.0").opt(), a("seconds", "integer").tok("IDLETIME").since("5.0.0").opt(), a("frequency", "integer").tok("FREQ").since("5.0.0").opt()]),
    Doc::new("restore-asking", "An internal command for migrating keys in a cluster", "3.0.0", "O(1) to create the new key and additional O(N*M) to reconstruct the serialized value, where N is the number of Redis objects composing the value and M their average size. For small string values the time complexity is thus O(1)+O(1*M) where M is small, so simply O(1). However for sorted set values the complexity is O(N*M*log(N)) because inserting values into sorted sets is O(log(N)).").flags(SYSCMD).history(&[("3.0.0", "Added the `REPLACE` modifier."), ("5.0.0", "Added the `ABSTTL` modifier."), ("5.0.0", "Added the `IDLETIME` and `FREQ` options.")]).args(&[a("key", "key").key(0), a("ttl", "integer"), a("serialized-value", "string"), a("replace", "pure-token").tok("REPLACE").since("3.0.0").opt(), a("absttl", "pure-token").tok("ABSTTL").since("5.0.0").opt(), a("seconds", "integer").tok("IDLETIME").since("5.0.0").opt(), a("frequency", "integer").tok("FREQ").since("5.0.0").opt()]),
    Doc::new("role", "Return the role of the instance in the context of replication", "2.8.12", "O(1)"),
    Doc::new("rpop", "Remove and get the last elements in a list", "1.0.0", "O(N) where N is the number of elements returned").history(&[("6.2.0", "Added the `count` argument.")]).args(&[a("key", "key").key(0), a("count", "integer").since("6.2.0").opt()]),
    Doc::new("rpoplpush", "Remove the last element in a list, prepend it to another list and return it", "1.2.0", "O(1)").flags(DEPRECATED).deprecated("6.2.0", "`LMOVE` with the `RIGHT` and `LEFT` arguments").args(&[a("source", "key").key(0), a("destination", "key").key(1)]),
    Doc::new("rpush", "Append one or multiple elements to a list", "1.0.0", "O(1) for each element added, so O(N) to add N elements when the command is called with multiple arguments.").history(&[("2.4.0", "Accepts multiple `element` arguments.")]).args(&[a("key", "key").key(0), a("element", "string").multi()]),
    Doc::new("rpushx", "Append an element to a list, only if the list exists", "2.2.0", "O(1) for each element added, so O(N) to add N elements when the command is called with multiple arguments.").history(&[("4.0.0", "Accepts multiple `element` arguments.")]).args(&[a("key", "key").key(0), a("element", "string").multi()]),
    Doc::new("sadd", "Add one or more members to a set", "1.0.0", "O(1) for each element added, so O(N) to add N elements when the command is called with multiple arguments.").history(&[("2.4.0", "Accepts multiple `member` arguments.")]).args(&[a("key", "key").key(0), a("member", "string").multi()]),
    Doc::new("save", "Synchronously save the dataset to disk", "1.0.0", "O(N) where N is the total number of keys in all databases"),
    Doc::new("scan", "Incrementally iterate the keys space", "2.8.0", "O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection.").history(&[("6.0.0", "Added the `TYPE` subcommand.")]).args(&[a("cursor", "integer"), a("pattern", "pattern").tok("MATCH").opt(), a("count", "integer").tok("COUNT").opt(), a("type", "string").tok("TYPE").since("6.0.0").opt()]),
    Doc::new("scard", "Get the number of members in a set", "1.0.0", "O(1)").args(&[a("key", "key").key(0)]),
    Doc::new("script", "A container for Lua scripts management commands", "2.6.0", "Depends on subcommand."),
    Doc::new("script|debug", "Set the debug mode for executed scripts.", "3.2.0", "O(1)").args(&[a("mode", "oneof").args(&[a("yes", "pure-token").tok("YES"), a("sync", "pure-token").tok("SYNC"), a("no", "pure-token").tok("NO")])]),
    Doc::new("script|exists", "Check existence of scripts in the script cache.", "2.6.0", "O(N) with N being the number of scripts to check (so checking a single script is an O(1) operation).").args(&[a("sha1", "string").multi()]),
    Doc::new("script|flush", "Remove all the scripts from the script cache.", "2.6.0", "O(N) with N being the number of scripts in cache").history(&[("6.2.0", "Added the `ASYNC` and `SYNC` flushing mode modifiers.")]).args(&[a("async", "oneof").since("6.2.0").opt().args(&[a("async", "pure-token").tok("ASYNC"), a("sync", "pure-token").tok("SYNC")])]),
    Doc::new("script|help", "Show helpful text about the different subcommands", "5.0.0", "O(1)"),
    Doc::new("script|kill", "Kill the script currently in execution.", "2.6.0", "O(1)"),
    Doc::new("script|load", "Load the specified Lua script into the script cache.", "2.6.0", "O(N) with N being the length in bytes of the script body.").args(&[a("script", "string")]),
    Doc::new("sdiff", "Subtract multiple sets", "1.0.0", "O(N) where N is the total number of elements in all given sets.").args(&[a("key", "key").key(0).multi()]),
    Doc::new("sdiffstore", "Subtract multiple sets and store the resulting set in a key", "1.0.0", "O(N) where N is the total number of elements in all given sets.").args(&[a("destination", "key").key(0), a("key", "key").key(1).multi()]),
    Doc::new("select", "Change the selected database for the current connection", "1.0.0", "O(1)").args(&[a("index", "integer")]),
    Doc::new("set", "Set the string value of a key", "1.0.0", "O(1)").history(&[("2.6.12", "Added the `EX`, `PX`, `NX` and `XX` options."), ("6.0.0", "Added the `KEEPTTL` option."), ("6.2.0", "Added the `GET`, `EXAT` and `PXAT` option."), ("7.0.0", "Allowed the `NX` and `GET` options to be used together.")]).args(&[a("key", "key").key(0), a("value", "string"), a("condition", "oneof").since("2.6.12").opt().args(&[a("nx", "pure-token").tok("NX"), a("xx", "pure-token").tok("XX")]), a("get", "pure-token").tok("GET").since("6.2.0").opt(), a("expiration", "oneof").opt().args(&[a("seconds", "integer").tok("EX").since("2.6.12"), a("milliseconds", "integer").tok("PX").since("2.6.12"), a("unix-time-seconds", "unix-time").tok("EXAT").since("6.2.0"), a("unix-time-milliseconds", "unix-time").tok("PXAT").since("6.2.0"), a("keepttl", "pure-token").tok("KEEPTTL").since("6.0.0")])]),
    Doc::new("setbit", "Sets or clears the bit at offset in the string value stored at key", "2.2.0", "O(1)").args(&[a("key", "key").key(0), a("offset", "integer"), a("value", "integer")]),
    Doc::new("setex", "Set the value and expiration of a key", "2.0.0", "O(1)").args(&[a("key", "key").key(0), a("seconds", "integer"), a("value", "string")]),
    Doc::new("setnx", "Set the value of a key, only if the key does not exist", "1.0.0", "O(1)").args(&[a("key", "key").key(0), a("value", "string")]),
    Doc::new("setrange", "Overwrite part of a string at key starting at the specified offset", "2.2.0", "O(1), not counting the time taken to copy the new string in place. Usually, this string is very small so the amortized complexity is O(1). Otherwise, complexity is O(M) with M being the length of the value argument.").args(&[a("key", "key").key(0), a("offset", "integer"), a("value", "string")]),
    Doc::new("shutdown", "Synchronously save the dataset to disk and then shut down the server", "1.0.0", "O(N) when saving, where N is the total number of keys in all databases when saving data, otherwise O(1)").history(&[("7.0.0", "Added the `NOW`, `FORCE` and `ABORT` modifiers.")]).args(&[a("nosave_save", "oneof").opt().args(&[a("nosave", "pure-token").tok("NOSAVE"), a("save", "pure-token").tok("SAVE")]), a("now", "pure-token").tok("NOW").since("7.0.0").opt(), a("force", "pure-token").tok("FORCE").since("7.0.0").opt(), a("abort", "pure-token").tok("ABORT").since("7.0.0").opt()]),
    Doc::new("sinter", "Intersect multiple sets", "1.0.0", "O(N*M) worst case where N is the cardinality of the smallest set and M is the number of sets.").args(&[a("key", "key").key(0).multi()]),
    Doc::new("sintercard", "Intersect multiple sets and return the cardinality of the result", "7.0.0", "O(N*M) worst case where N is the cardinality of the smallest set and M is the number of sets.").args(&[a("numkeys", "integer"), a("key", "key").key(0).multi(), a("limit", "integer").tok("LIMIT").opt()]),
    Doc::new("sinterstore", "Intersect multiple sets and store the resulting set in a key", "1.0.0", "O(N*M) worst case where N is the cardinality of the smallest set and M is the number of sets.").args(&[a("destination", "key").key(0), a("key", "key").key(1).multi()]),
    Doc::new("sismember", "Determine if a given value is a member of a set", "1.0.0", "O(1)").args(&[a("key", "key").key(0), a("member", "string")]),
    Doc::new("slaveof", "Make the server a replica of another instance, or promote it as master.", "1.0.0", "O(1)").flags(DEPRECATED).deprecated("5.0.0", "`REPLICAOF`").args(&[a("args", "oneof").args(&[a("host-port", "block").args(&[a("host", "string"), a("port", "integer")]), a("no-one", "block").args(&[a("no", "pure-token").tok("NO"), a("one", "pure-token").tok("ONE")])])]),
    Doc::new("slowlog", "A container for slow log commands", "2.2.12", "Depends on subcommand."),
    Doc::new("slowlog|get", "Get the slow log's entries", "2.2.12", "O(N) where N is the number of entries returned").history(&[("4.0.0", "Added client IP address, port and name to the reply.")]).args(&[a("count", "integer").opt()]),
    Doc::new("slowlog|help", "Show helpful text about the different subcommands", "6.2.0", "O(1)"),
    Doc::new("slowlog|len", "Get the slow log's length", "2.2.12", "O(1)"),
    Doc::new("slowlog|reset", "Clear all entries from the slow log", "2.2.12", "O(N) where N is the number of entries in the slowlog"),
    Doc::new("smembers", "Get all the members in a set", "1.0.0", "O(N) where N is the set cardinality.").args(&[a("key", "key").key(0)]),
    Doc::new("smismember", "Returns the membership associated with the given elements for a set", "6.2.0", "O(N) where N is the number of elements being checked for membership").args(&[a("key", "key").key(0), a("member", "string").multi()]),
    Doc::new("smove", "Move a member from one set to another", "1.0.0", "O(1)").args(&[a("source", "key").key(0), a("destination", "key").key(1), a("member", "string")]),
    Doc::new("sort", "Sort the elements in a list, set or sorted set", "1.0.0", "O(N+M*log(M)) where N is the number of elements in the list or set to sort, and M the number of returned elements. When the elements are not sorted, complexity is O(N).").args(&[a("key", "key").key(0), a("pattern", "pattern").key(1).tok("BY").opt(), a("offset_count", "block").tok("LIMIT").opt().args(&[a("offset", "integer"), a("count", "integer")]), a("pattern", "pattern").key(1).tok("GET").opt().multi().multi_tok(), a("order", "oneof").opt().args(&[a("asc", "pure-token").tok("ASC"), a("desc", "pure-token").tok("DESC")]), a("sorting", "pure-token").tok("ALPHA").opt(), a("destination", "key").key(2).tok("STORE").opt()]),
    Doc::new("sort_ro", "Sort the elements in a list, set or sorted set. Read-only variant of SORT.", "7.0.0", "O(N+M*log(M)) where N is the number of elements in the list or set to sort, and M the number of returned elements. When the elements are not sorted, complexity is O(N).").args(&[a("key", "key").key(0), a("pattern", "pattern").key(1).tok("BY").opt(), a("offset_count", "block").tok("LIMIT").opt().args(&[a("offset", "integer"), a("count", "integer")]), a("pattern", "pattern").key(1).tok("GET").opt().multi().multi_tok(), a("order", "oneof").opt().args(&[a("asc", "pure-token").tok("ASC"), a("desc", "pure-token").tok("DESC")]), a("sorting", "pure-token").tok("ALPHA").opt()]),
    Doc::new("spop", "Remove and return one or multiple random members from a set", "1.0.0", "Without the count argument O(1), otherwise O(N) where N is the value of the passed count.").history(&[("3.2.0", "Added the `count` argument.")]).args(&[a("key", "key").key(0), a("count", "integer").since("3.2.0").opt()]),
    Doc::new("spublish", "Post a message to a shard channel", "7.0.0", "O(N) where N is the number of clients subscribed to the receiving shard channel.").args(&[a("shardchannel", "string"), a("message", "string")]),
    Doc::new("srandmember", "Get one or multiple random members from a set", "1.0.0", "Without the count argument O(1), otherwise O(N) where N is the absolute value of the passed count.").history(&[("2.6.0", "Added the optional `count` argument.")]).args(&[a("key", "key").key(0), a("count", "integer").since("2.6.0").opt()]),
    Doc::new("srem", "Remove one or more members from a set", "1.0.0", "O(N) where N is the number of members to be removed.").history(&[("2.4.0", "Accepts multiple `member` arguments.")]).args(&[a("key", "key").key(0), a("member", "string").multi()]),
    Doc::new("sscan", "Incrementally iterate Set elements", "2.8.0", "O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection..").args(&[a("key", "key").key(0), a("cursor", "integer"), a("pattern", "pattern").tok("MATCH").opt(), a("count", "integer").tok("COUNT").opt()]),
    Doc::new("ssubscribe", "Listen for messages published to the given shard channels", "7.0.0", "O(N) where N is the number of shard channels to subscribe to.").args(&[a("shardchannel", "string").multi()]),
    Doc::new("strlen", "Get the length of the value stored in a key", "2.2.0", "O(1)").args(&[a("key", "key").key(0)]),
    Doc::new("subscribe", "Listen for messages published to the given channels", "2.0.0", "O(N) where N is the number of channels to subscribe to.").args(&[a("channel", "string").multi()]),
    Doc::new("substr", "Get a substring of the string stored at a key", "1.0.0", "O(N) where N is the length of the returned string. The complexity is ultimately determined by the returned length, but because creating a substring from an existing string is very cheap, it can be considered O(1) for small strings.").flags(DEPRECATED).deprecated("2.0.0", "`GETRANGE`").args(&[a("key", "key").key(0), a("start", "integer"), a("end", "integer")]),
    Doc::new("sunion", "Add multiple sets", "1.0.0", "O(N) where N is the total number of elements in all given sets.").args(&[a("key", "key").key(0).multi()]),
    Doc::new("sunionstore", "Add multiple sets and store the resulting set in a key", "1.0.0", "O(N) where N is the total number of elements in all given sets.").args(&[a("destination", "key").key(0), a("key", "key").key(1).multi()]),
    Doc::new("sunsubscribe", "Stop listening for messages posted to the given shard channels", "7.0.0", "O(N) where N is the number of clients already subscribed to a shard channel.").args(&[a("shardchannel", "string").opt().multi()]),
    Doc::new("swapdb", "Swaps two Redis databases", "4.0.0", "O(N) where N is the count of clients watching or blocking on keys from both databases.").args(&[a("index1", "integer"), a("index2", "integer")]),
    Doc::new("sync", "Internal command used for replication", "1.0.0", ""),
    Doc::new("time", "Return the current server time", "2.6.0", "O(1)"),
    Doc::new("touch", "Alters the last access time of a key(s). Returns the number of existing keys specified.", "3.2.1", "O(N) where N is the number of keys that will be touched.").args(&[a("key", "key").key(0).multi()]),
    Doc::new("ttl", "Get the time to live for a key in seconds", "1.0.0", "O(1)").history(&[("2.8.0", "Added the -2 reply.")]).args(&[a("key", "key").key(0)]),
    Doc::new("type", "Determine the type stored at key", "1.0.0", "O(1)").args(&[a("key", "key").key(0)]),
    Doc::new("unlink", "Delete a key asynchronously in another thread. Otherwise it is just as DEL, but non blocking.", "4.0.0", "O(1) for each key removed regardless of its size. Then the command does O(N) work in a different thread in order to reclaim memory, where N is the number of allocations the deleted objects where composed of.").args(&[a("key", "key").key(0).multi()]),
    Doc::new("unsubscribe", "Stop listening for messages posted to the given channels", "2.0.0", "O(N) where N is the number of clients already subscribed to a channel.").args(&[a("channel", "string").opt().multi()]),
    Doc::new("unwatch", "Forget about all watched keys", "2.2.0", "O(1)"),
    Doc::new("wait", "Wait for the synchronous replication of all the write commands sent in the context of the current connection", "3.0.0", "O(1)").args(&[a("numreplicas", "integer"), a("timeout", "integer")]),
    Doc::new("watch", "Watch the given keys to determine execution of the MULTI/EXEC block", "2.2.0", "O(1) for every key.").args(&[a("key", "key").key(0).multi()]),
    Doc::new("xack", "Marks a pending message as correctly processed, effectively removing it from the pending entries list of the consumer group. Return value of the command is the number of messages successfully acknowledged, that is, the IDs we were actually able to resolve in the PEL.", "5.0.0", "O(1) for each message ID processed.").args(&[a("key", "key").key(0), a("group", "string"), a("id", "string").multi()]),
    Doc::new("xadd", "Appends a new entry to a stream", "5.0.0", "O(1) when adding a new entry, O(N) when trimming where N being the number of entries evicted.").history(&[("6.2.0", "Added the `NOMKSTREAM` option, `MINID` trimming strategy and the `LIMIT` option."), ("7.0.0", "Added support for the `<ms>-*` explicit ID form.")]).args(&[a("key", "key").key(0), a("nomkstream", "pure-token").tok("NOMKSTREAM").since("6.2.0").opt(), a("trim", "block").opt().args(&[a("strategy", "oneof").args(&[a("maxlen", "pure-token").tok("MAXLEN"), a("minid", "pure-token").tok("MINID").since("6.2.0")]), a("operator", "oneof").opt().args(&[a("equal", "pure-token").tok("="), a("approximately", "pure-token").tok("~")]), a("threshold", "string"), a("count", "integer").tok("LIMIT").since("6.2.0").opt()]), a("id_or_auto", "oneof").args(&[a("auto_id", "pure-token").tok("*"), a("id", "string")]), a("field_value", "block").multi().args(&[a("field", "string"), a("value", "string")])]),
    Doc::new("xautoclaim", "Changes (or acquires) ownership of messages in a consumer group, as if the messages were delivered to the specified consumer.", "6.2.0", "O(1) if COUNT is small.").history(&[("7.0.0", "Added an element to the reply array, containing deleted entries the command cleared from the PEL")]).args(&[a("key", "key").key(0), a("group", "string"), a("consumer", "string"), a("min-idle-time", "string"), a("start", "string"), a("count", "integer").tok("COUNT").opt(), a("justid", "pure-token").tok("JUSTID").opt()]),
    Doc::new("xclaim", "Changes (or acquires) ownership of a message in a consumer group, as if the message was delivered to the specified consumer.", "5.0.0", "O(log N) with N being the number of messages in the PEL of the consumer group.").args(&[a("key", "key").key(0), a("group", "string"), a("consumer", "string"), a("min-idle-time", "string"), a("id", "string").multi(), a("ms", "integer").tok("IDLE").opt(), a("unix-time-milliseconds", "unix-time").tok("TIME").opt(), a("count", "integer").tok("RETRYCOUNT").opt(), a("force", "pure-token").tok("FORCE").opt(), a("justid", "pure-token").tok("JUSTID").opt(), a("id", "string").tok("LASTID").opt()]),
    Doc::new("xdel", "Removes the specified entries from the stream. Returns the number of items actually deleted, that may be different from the number of IDs passed in case certain IDs do not exist.", "5.0.0", "O(1) for each single item to delete in the stream, regardless of the stream size.").args(&[a("key", "key").key(0), a("id", "string").multi()]),
    Doc::new("xgroup", "A container for consumer groups commands", "5.0.0", "Depends on subcommand."),
    Doc::new("xgroup|create", "Create a consumer group.", "5.0.0", "O(1)").history(&[("7.0.0", "Added the `entries_read` named argument.")]).args(&[a("key", "key").key(0), a("groupname", "string"), a("id", "oneof").args(&[a("id", "string"), a("new_id", "pure-token").tok("$")]), a("mkstream", "pure-token").tok("MKSTREAM").opt(), a("entries_read", "integer").tok("ENTRIESREAD").opt()]),
    Doc::new("xgroup|createconsumer", "Create a consumer in a consumer group.", "6.2.0", "O(1)").args(&[a("key", "key").key(0), a("groupname", "string"), a("consumername", "string")]),
    Doc::new("xgroup|delconsumer", "Delete a consumer from a consumer group.", "5.0.0", "O(1)").args(&[a("key", "key").key(0), a("groupname", "string"), a("consumername", "string")]),
    Doc::new("xgroup|destroy", "Destroy a consumer group.", "5.0.0", "O(N) where N is the number of entries in the group's pending entries list (PEL).").args(&[a("key", "key").key(0), a("groupname", "string")]),
    Doc::new("xgroup|help", "Show helpful text about the different subcommands", "5.0.0", "O(1)"),
    Doc::new("xgroup|setid", "Set a consumer group to an arbitrary last delivered ID value.", "5.0.0", "O(1)").history(&[("7.0.0", "Added the optional `entries_read` argument.")]).args(&[a("key", "key").key(0), a("groupname", "string"), a("id", "oneof").args(&[a("id", "string"), a("new_id", "pure-token").tok("$")]), a("entries_read", "integer").tok("ENTRIESREAD").opt()]),
    Doc::new("xinfo", "A container for stream introspection commands", "5.0.0", "Depends on subcommand."),
    Doc::new("xinfo|consumers", "List the consumers in a consumer group", "5.0.0", "O(1)").args(&[a("key", "key").key(0), a("groupname", "string")]),
    Doc::new("xinfo|groups", "List the consumer groups of a stream", "5.0.0", "O(1)").history(&[("7.0.0", "Added the `entries-read` and `lag` fields")]).args(&[a("key", "key").key(0)]),
    Doc::new("xinfo|help", "Show helpful text about the different subcommands", "5.0.0", "O(1)"),
    Doc::new("xinfo|stream", "Get information about a stream", "5.0.0", "O(1)").history(&[("6.0.0", "Added the `FULL` modifier."), ("7.0.0", "Added the `max-deleted-entry-id`, `entries-added`, `recorded-first-entry-id`, `entries-read` and `lag` fields")]).args(&[a("key", "key").key(0), a("full", "block").tok("FULL").opt().args(&[a("count", "integer").tok("COUNT").opt()])]),
    Doc::new("xlen", "Return the number of entries in a stream", "5.0.0", "O(1)").args(&[a("key", "key").key(0)]),
    Doc::new("xpending", "Return information and entries from a stream consumer group pending entries list, that are messages fetched but never acknowledged.", "5.0.0", "O(N) with N being the number of elements returned, so asking for a small fixed number of entries per call is O(1). O(M), where M is the total number of entries scanned when used with the IDLE filter. When the command returns just the summary and the list of consumers is small, it runs in O(1) time; otherwise, an additional O(N) time for iterating every consumer.").history(&[("6.2.0", "Added the `IDLE` option and exclusive range intervals.")]).args(&[a("key", "key").key(0), a("group", "string"), a("filters", "block").opt().args(&[a("min-idle-time", "integer").tok("IDLE").since("6.2.0").opt(), a("start", "string"), a("end", "string"), a("count", "integer"), a("consumer", "string").opt()])]),
    Doc::new("xrange", "Return a range of elements in a stream, with IDs matching the specified IDs interval", "5.0.0", "O(N) with N being the number of elements being returned. If N is constant (e.g. always asking for the first 10 elements with COUNT), you can consider it O(1).").history(&[("6.2.0", "Added exclusive ranges.")]).args(&[a("key", "key").key(0), a("start", "string"), a("end", "string"), a("count", "integer").tok("COUNT").opt()]),
    Doc::new("xread", "Return never seen elements in multiple streams, with IDs greater than the ones reported by the caller for each stream. Can block.", "5.0.0", "For each stream mentioned: O(N) with N being the number of elements being returned, it means that XREAD-ing with a fixed COUNT is O(1). Note that when the BLOCK option is used, XADD will pay O(M) time in order to serve the M clients blocked on the stream getting new data.").args(&[a("count", "integer").tok("COUNT").opt(), a("milliseconds", "integer").tok("BLOCK").opt(), a("streams", "block").tok("STREAMS").args(&[a("key", "key").key(0).multi(), a("id", "string").multi()])]),
    Doc::new("xreadgroup", "Return new entries from a stream using a consumer group, or access the history of the pending entries for a given consumer. Can block.", "5.0.0", "For each stream mentioned: O(M) with M being the number of elements returned. If M is constant (e.g. always asking for the first 10 elements with COUNT), you can consider it O(1). On the other side when XREADGROUP blocks, XADD will pay the O(N) time in order to serve the N clients blocked on the stream getting new data.").args(&[a("group_consumer", "block").tok("GROUP").args(&[a("group", "string"), a("consumer", "string")]), a("count", "integer").tok("COUNT").opt(), a("milliseconds", "integer").tok("BLOCK").opt(), a("noack", "pure-token").tok("NOACK").opt(), a("streams", "block").tok("STREAMS").args(&[a("key", "key").key(0).multi(), a("id", "string").multi()])]),
    Doc::new("xrevrange", "Return a range of elements in a stream, with IDs matching the specified IDs interval, in reverse order (from greater to smaller IDs) compared to XRANGE", "5.0.0", "O(N) with N being the number of elements returned. If N is constant (e.g. always asking for the first 10 elements with COUNT), you can consider it O(1).").history(&[("6.2.0", "Added exclusive ranges.")]).args(&[a("key", "key").key(0), a("end", "string"), a("start", "string"), a("count", "integer").tok("COUNT").opt()]),
    Doc::new("xsetid", "An internal command for replicating stream values", "5.0.0", "O(1)").history(&[("7.0.0", "Added the `entries_added` and `max_deleted_entry_id` arguments.")]).args(&[a("key", "key").key(0), a("last-id", "string"), a("entries_added", "integer").tok("ENTRIESADDED").since("7.0.0").opt(), a("max_deleted_entry_id", "string").tok("MAXDELETEDID").since("7.0.0").opt()]),
    Doc::new("xtrim", "Trims the stream to (approximately if '~' is passed) a certain size", "5.0.0", "O(N), with N being the number of evicted entries. Constant times are very small however, since entries are organized in macro nodes containing multiple entries that can be released with a single deallocation.").history(&[("6.2.0", "Added the `MINID` trimming strategy and the `LIMIT` option.")]).args(&[a("key", "key").key(0), a("trim", "block").args(&[a("strategy", "oneof").args(&[a("maxlen", "pure-token").tok("MAXLEN"), a("minid", "pure-token").tok("MINID").since("6.2.0")]), a("operator", "oneof").opt().args(&[a("equal", "pure-token").tok("="), a("approximately", "pure-token").tok("~")]), a("threshold", "string"), a("count", "integer").tok("LIMIT").since("6.2.0").opt()])]),
    Doc::new("zadd", "Add one or more members to a sorted set, or update its score if it already exists", "1.2.0", "O(log(N)) for each item added, where N is the number of elements in the sorted set.").history(&[("2.4.0", "Accepts multiple elements."), ("3.0.2", "Added the `XX`, `NX`, `CH` and `INCR` options."), ("6.2.0", "Added the `GT` and `LT` options.")]).args(&[a("key", "key").key(0), a("condition", "oneof").since("3.0.2").opt().args(&[a("nx", "pure-token").tok("NX"), a("xx", "pure-token").tok("XX")]), a("comparison", "oneof").since("6.2.0").opt().args(&[a("gt", "pure-token").tok("GT"), a("lt", "pure-token").tok("LT")]), a("change", "pure-token").tok("CH").since("3.0.2").opt(), a("increment", "pure-token").tok("INCR").since("3.0.2").opt(), a("score_member", "block").multi().args(&[a("score", "double"), a("member", "string")])]),
    Doc::new("zcard", "Get the number of members in a sorted set", "1.2.0", "O(1)").args(&[a("key", "key").key(0)]),
    Doc::new("zcount", "Count the members in a sorted set with scores within the given values", "2.0.0", "O(log(N)) with N being the number of elements in the sorted set.").args(&[a("key", "key").key(0), a("min", "double"), a("max", "double")]),
    Doc::new("zdiff", "Subtract multiple sorted sets", "6.2.0", "O(L + (N-K)log(N)) worst case where L is the total number of elements in all the sets, N is the size of the first set, and K is the size of the result set.").args(&[a("numkeys", "integer"), a("key", "key").key(0).multi(), a("withscores", "pure-token").tok("WITHSCORES").opt()]),
    Doc::new("zdiffstore", "Subtract multiple sorted sets and store the resulting sorted set in a new key", "6.2.0", "O(L + (N-K)log(N)) worst case where L is the total number of elements in all the sets, N is the size of the first set, and K is the size of the result set.").args(&[a("destination", "key").key(0), a("numkeys", "integer"), a("key", "key").key(1).multi()]),
    Doc::new("zincrby", "Increment the score of a member in a sorted set", "1.2.0", "O(log(N)) where N is the number of elements in the sorted set.").args(&[a("key", "key").key(0), a("increment", "integer"), a("member", "string")]),
    Doc::new("zinter", "Intersect multiple sorted sets", "6.2.0", "O(N*K)+O(M*log(M)) worst case with N being the smallest input sorted set, K being the number of input sorted sets and M being the number of elements in the resulting sorted set.").args(&[a("numkeys", "integer"), a("key", "key").key(0).multi(), a("weight", "integer").tok("WEIGHTS").opt().multi(), a("aggregate", "oneof").tok("AGGREGATE").opt().args(&[a("sum", "pure-token").tok("SUM"), a("min", "pure-token").tok("MIN"), a("max", "pure-token").tok("MAX")]), a("withscores", "pure-token").tok("WITHSCORES").opt()]),
    Doc::new("zintercard", "Intersect multiple sorted sets and return the cardinality of the result", "7.0.0", "O(N*K) worst case with N being the smallest input sorted set, K being the number of input sorted sets.").args(&[a("numkeys", "integer"), a("key", "key").key(0).multi(), a("limit", "integer").tok("LIMIT").opt()]),
    Doc::new("zinterstore", "Intersect multiple sorted sets and store the resulting sorted set in a new key", "2.0.0", "O(N*K)+O(M*log(M)) worst case with N being the smallest input sorted set, K being the number of input sorted sets and M being the number of elements in the resulting sorted set.").args(&[a("destination", "key").key(0), a("numkeys", "integer"), a("key", "key").key(1).multi(), a("weight", "integer").tok("WEIGHTS").opt().multi(), a("aggregate", "oneof").tok("AGGREGATE").opt().args(&[a("sum", "pure-token").tok("SUM"), a("min", "pure-token").tok("MIN"), a("max", "pure-token").tok("MAX")])]),
    Doc::new("zlexcount", "Count the number of members in a sorted set between a given lexicographical range", "2.8.9", "O(log(N)) with N being the number of elements in the sorted set.").args(&[a("key", "key").key(0), a("min", "string"), a("max", "string")]),
    Doc::new("zmpop", "Remove and return members with scores in a sorted set", "7.0.0", "O(K) + O(M*log(N)) where K is the number of provided keys, N being the number of elements in the sorted set, and M being the number of elements popped.").args(&[a("numkeys", "integer"), a("key", "key").key(0).multi(), a("where", "oneof").args(&[a("min", "pure-token").tok("MIN"), a("max", "pure-token").tok("MAX")]), a("count", "integer").tok("COUNT").opt()]),
    Doc::new("zmscore", "Get the score associated with the given members in a sorted set", "6.2.0", "O(N) where N is the number of members being requested.").args(&[a("key", "key").key(0), a("member", "string").multi()]),
    Doc::new("zpopmax", "Remove and return members with the highest scores in a sorted set", "5.0.0", "O(log(N)*M) with N being the number of elements in the sorted set, and M being the number of elements popped.").args(&[a("key", "key").key(0), a("count", "integer").opt()]),
    Doc::new("zpopmin", "Remove and return members with the lowest scores in a sorted set", "5.0.0", "O(log(N)*M) with N being the number of elements in the sorted set, and M being the number of elements popped.").args(&[a("key", "key").key(0), a("count", "integer").opt()]),
    Doc::new("zrandmember", "Get one or multiple random elements from a sorted set", "6.2.0", "O(N) where N is the number of elements returned").args(&[a("key", "key").key(0), a("options", "block").opt().args(&[a("count", "integer"), a("withscores", "pure-token").tok("WITHSCORES").opt()])]),
    Doc::new("zrange", "Return a range of members in a sorted set", "1.2.0", "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements returned.").history(&[("6.2.0", "Added the `REV`, `BYSCORE`, `BYLEX` and `LIMIT` options.")]).args(&[a("key", "key").key(0), a("start", "string"), a("stop", "string"), a("sortby", "oneof").since("6.2.0").opt().args(&[a("byscore", "pure-token").tok("BYSCORE"), a("bylex", "pure-token").tok("BYLEX")]), a("rev", "pure-token").tok("REV").since("6.2.0").opt(), a("offset_count", "block").tok("LIMIT").since("6.2.0").opt().args(&[a("offset", "integer"), a("count", "integer")]), a("withscores", "pure-token").tok("WITHSCORES").opt()]),
    Doc::new("zrangebylex", "Return a range of members in a sorted set, by lexicographical range", "2.8.9", "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements being returned. If M is constant (e.g. always asking for the first 10 elements with LIMIT), you can consider it O(log(N)).").flags(DEPRECATED).deprecated("6.2.0", "`ZRANGE` with the `BYLEX` argument").args(&[a("key", "key").key(0), a("min", "string"), a("max", "string"), a("offset_count", "block").tok("LIMIT").opt().args(&[a("offset", "integer"), a("count", "integer")])]),
    Doc::new("zrangebyscore", "Return a range of members in a sorted set, by score", "1.0.5", "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements being returned. If M is constant (e.g. always asking for the first 10 elements with LIMIT), you can consider it O(log(N)).").flags(DEPRECATED).deprecated("6.2.0", "`ZRANGE` with the `BYSCORE` argument").history(&[("2.0.0", "Added the `WITHSCORES` modifier.")]).args(&[a("key", "key").key(0), a("min", "double"), a("max", "double"), a("withscores", "pure-token").tok("WITHSCORES").since("2.0.0").opt(), a("offset_count", "block").tok("LIMIT").opt().args(&[a("offset", "integer"), a("count", "integer")])]),
    Doc::new("zrangestore", "Store a range of members from sorted set into another key", "6.2.0", "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements stored into the destination key.").args(&[a("dst", "key").key(0), a("src", "key").key(1), a("min", "string"), a("max", "string"), a("sortby", "oneof").opt().args(&[a("byscore", "pure-token").tok("BYSCORE"), a("bylex", "pure-token").tok("BYLEX")]), a("rev", "pure-token").tok("REV").opt(), a("offset_count", "block").tok("LIMIT").opt().args(&[a("offset", "integer"), a("count", "integer")])]),
    Doc::new("zrank", "Determine the index of a member in a sorted set", "2.0.0", "O(log(N))").args(&[a("key", "key").key(0), a("member", "string")]),
    Doc::new("zrem", "Remove one or more members from a sorted set", "1.2.0", "O(M*log(N)) with N being the number of elements in the sorted set and M the number of elements to be removed.").history(&[("2.4.0", "Accepts multiple elements.")]).args(&[a("key", "key").key(0), a("member", "string").multi()]),
    Doc::new("zremrangebylex", "Remove all members in a sorted set between the given lexicographical range", "2.8.9", "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements removed by the operation.").args(&[a("key", "key").key(0), a("min", "string"), a("max", "string")]),
    Doc::new("zremrangebyrank", "Remove all members in a sorted set within the given indexes", "2.0.0", "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements removed by the operation.").args(&[a("key", "key").key(0), a("start", "integer"), a("stop", "integer")]),
    Doc::new("zremrangebyscore", "Remove all members in a sorted set within the given scores", "1.2.0", "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements removed by the operation.").args(&[a("key", "key").key(0), a("min", "double"), a("max", "double")]),
    Doc::new("zrevrange", "Return a range of members in a sorted set, by index, with scores ordered from high to low", "1.2.0", "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements returned.").flags(DEPRECATED).deprecated("6.2.0", "`ZRANGE` with the `REV` argument").args(&[a("key", "key").key(0), a("start", "integer"), a("stop", "integer"), a("withscores", "pure-token").tok("WITHSCORES").opt()]),
    Doc::new("zrevrangebylex", "Return a range of members in a sorted set, by lexicographical range, ordered from higher to lower strings.", "2.8.9", "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements being returned. If M is constant (e.g. always asking for the first 10 elements with LIMIT), you can consider it O(log(N)).").flags(DEPRECATED).deprecated("6.2.0", "`ZRANGE` with the `REV` and `BYLEX` arguments").args(&[a("key", "key").key(0), a("max", "string"), a("min", "string"), a("offset_count", "block").tok("LIMIT").opt().args(&[a("offset", "integer"), a("count", "integer")])]),
    Doc::new("zrevrangebyscore", "Return a range of members in a sorted set, by score, with scores ordered from high to low", "2.2.0", "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements being returned. If M is constant (e.g. always asking for the first 10 elements with LIMIT), you can consider it O(log(N)).").flags(DEPRECATED).deprecated("6.2.0", "`ZRANGE` with the `REV` and `BYSCORE` arguments").history(&[("2.1.6", "`min` and `max` can be exclusive.")]).args(&[a("key", "key").key(0), a("max", "double"), a("min", "double"), a("withscores", "pure-token").tok("WITHSCORES").opt(), a("offset_count", "block").tok("LIMIT").opt().args(&[a("offset", "integer"), a("count", "integer")])]),
    Doc::new("zrevrank", "Determine the index of a member in a sorted set, with scores ordered from high to low", "2.0.0", "O(log(N))").args(&[a("key", "key").key(0), a("member", "string")]),
    Doc::new("zscan", "Incrementally iterate sorted sets elements and associated scores", "2.8.0", "O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection..").args(&[a("key", "key").key(0), a("cursor", "integer"), a("pattern", "pattern").tok("MATCH").opt(), a("count", "integer").tok("COUNT").opt()]),
    Doc::new("zscore", "Get the score associated with the given member in a sorted set", "1.2.0", "O(1)").args(&[a("key", "key").key(0), a("member", "string")]),
    Doc::new("zunion", "Add multiple sorted sets", "6.2.0", "O(N)+O(M*log(M)) with N being the sum of the sizes of the input sorted sets, and M being the number of elements in the resulting sorted set.").args(&[a("numkeys", "integer"), a("key", "key").key(0).multi(), a("weight", "integer").tok("WEIGHTS").opt().multi(), a("aggregate", "oneof").tok("AGGREGATE").opt().args(&[a("sum", "pure-token").tok("SUM"), a("min", "pure-token").tok("MIN"), a("max", "pure-token").tok("MAX")]), a("withscores", "pure-token").tok("WITHSCORES").opt()]),
    Doc::new("zunionstore", "Add multiple sorted sets and store the resulting sorted set in a new key", "2.0.0", "O(N)+O(M log(M)) with N being the sum of the sizes of the input sorted sets, and M being the number of elements in the resulting sorted set.").args(&[a("destination", "key").key(0), a("numkeys", "integer"), a("key", "key").key(1).multi(), a("weight", "integer").tok("WEIGHTS").opt().multi(), a("aggregate", "oneof").tok("AGGREGATE").opt().args(&[a("sum", "pure-token").tok("SUM"), a("min", "pure-token").tok("MIN"), a("max", "pure-token").tok("MAX")])]),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_sorted_and_unique() {
        for w in DOCS.windows(2) {
            assert!(w[0].name < w[1].name, "{} before {}", w[0].name, w[1].name);
        }
        assert!(lookup("client|kill").is_some() && lookup("nosuch").is_none());
    }
}
