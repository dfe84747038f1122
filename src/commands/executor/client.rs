//! A client's session state, owned by the executor (the socket side is elsewhere).

use crate::protocol::reply::Resp;
use std::collections::HashSet;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplyMode {
    On,
    Off,
    /// CLIENT REPLY SKIP was just run: skip the next command's reply.
    SkipNext,
    Skip,
}

#[derive(Debug)]
pub struct Client {
    pub id: u64,
    /// The I/O thread's connection id (threaded mode only).
    pub conn_id: u64,
    pub name: Option<Vec<u8>>,
    pub db: usize,
    pub resp: Resp,
    pub authenticated: bool,
    /// The ACL user's slot (`commands::acl::Acl`; 0: `default`) and its name.
    pub user: usize,
    pub user_name: Vec<u8>,
    pub reply_mode: ReplyMode,
    pub no_evict: bool,
    /// What this client's buffers hold, as the socket side measures it (client eviction).
    pub memory: std::sync::Arc<super::client_memory::ConnMemory>,
    /// Disconnected by `maxmemory-clients`: runs nothing more, closes at the turn's end.
    pub evicted: bool,
    pub addr: String,
    pub laddr: String,
    pub fd: i32,
    pub created_ms: i64,
    pub last_interaction_ms: i64,
    /// The last command looked up (`cmd=` in CLIENT LIST), and its container when it is a
    /// subcommand (shown as `container|sub`).
    pub last_cmd: &'static str,
    pub last_cmd_parent: Option<&'static str>,
    /// Set by the HTTP guard (a `POST` or `Host:` command): close without sending the
    /// replies of the commands read with it, as Redis does.
    pub http_guard_close: bool,
    /// Set by QUIT or a protocol error: close once the reply is written.
    pub close_after_reply: bool,
    /// Buffer sizes, refreshed by the connection side (for CLIENT LIST and INFO).
    pub qbuf_bytes: u64,
    pub obuf_bytes: u64,
    /// The rest of what the connection side measures (io-threads 1; all 0 with I/O
    /// threads, whose connections the executor does not see).
    pub bufs: BufFigures,
    /// Bytes of the arguments of the command this client is running, set while CLIENT
    /// LIST / INFO describe the caller (`argv-mem`; 0 for every other client, as in
    /// Redis, where only a running command has arguments).
    pub argv_bytes: u64,
    /// When the output buffer first went over the soft limit (ms), for the soft timer.
    pub obuf_soft_since_ms: i64,
    /// Index in `Server::clients` (pub/sub delivery finds subscribers by slot).
    pub slot: usize,
    /// Channels and patterns this client is subscribed to (Redis keeps patterns as a
    /// list: PUNSUBSCRIBE with no argument replies in subscription order).
    pub sub_channels: HashSet<Vec<u8>>,
    pub sub_patterns: Vec<Vec<u8>>,
    /// Shard channels (SSUBSCRIBE).
    pub sub_shard: HashSet<Vec<u8>>,
    /// Outbox: pub/sub messages other clients' commands pushed to this client, moved to
    /// the connection's output by the socket side (see `commands::pubsub`).
    pub pushed: Vec<u8>,
    /// Queued in `PubSub::pending`.
    pub in_pending: bool,
    /// In MONITOR mode: every command the server runs is copied to it.
    pub monitor: bool,
    /// Went over its output buffer limit while receiving messages: close it (flag `A`).
    pub close_asap: bool,
    /// Output up to this offset is pub/sub output, sent even under CLIENT REPLY OFF/SKIP.
    pub keep_output_to: Option<usize>,
    /// Parked by a blocking command (src/commands/executor/blocking.rs): runs nothing until served.
    pub blocked: bool,
    /// Commands read behind a command that blocked (io-threads 1), run once it is served.
    pub deferred: std::collections::VecDeque<OwnedCommand>,
    /// Inside MULTI: the queued commands (src/commands/transactions.rs).
    pub multi: Option<MultiState>,
    /// WATCHed keys: (db, key, expired when watched).
    pub watched: Vec<(usize, Vec<u8>, bool)>,
    /// Running EXEC of this many commands: CLIENT LIST shows the client as Redis does
    /// (still in MULTI, `cmd=exec`).
    pub in_exec: Option<usize>,
    /// Connected through the Unix socket (`unixsocket`; CLIENT LIST flag `U`).
    pub unix_socket: bool,
    /// A replica's link (after PSYNC/SYNC): its replies are not sent, the replication
    /// stream is (flag `S`).
    pub replica: bool,
    /// What REPLCONF told before PSYNC: the replica's listening port, whether it takes the
    /// `$EOF:` RDB form.
    pub repl_listening_port: u16,
    pub repl_capa_eof: bool,
    /// REPLCONF capa cairn-image-<fingerprint>: a cairn replica that loads our images.
    pub repl_capa_image: bool,
    /// REPLCONF rdb-only 1: a full sync sends the RDB and closes.
    pub repl_rdb_only: bool,
    /// The replication offset after this client's last command (what WAIT waits for).
    pub woff: u64,
    /// The primary's link (this server is its replica): runs the stream, writes even when
    /// replicas are read-only, gets no replies (flag `M`).
    pub master: bool,
    /// CLIENT TRACKING ON: what it asked for (the key table is `Keyspace::tracking`).
    pub tracking: Option<crate::keyspace::tracking::ClientTracking>,
}

/// A connection's buffers as CLIENT LIST shows them.
#[derive(Debug, Default, Clone, Copy)]
pub struct BufFigures {
    /// The query buffer's allocation (`qbuf-free` is this minus `qbuf`).
    pub qbuf_capacity_bytes: u64,
    /// The output buffer's allocation (`rbs`) and its recent peak of waiting bytes
    /// (`rbp`).
    pub out_capacity_bytes: u64,
    pub out_peak_bytes: u64,
    /// Output waiting in the owned buffer (`obl`), and stored values queued by reference
    /// (`oll`; their bytes are `omem`).
    pub out_owned_bytes: u64,
    pub out_refs: u64,
    /// Arguments of a half-read command parsed so far (part of `argv-mem`).
    pub parsed_arg_bytes: u64,
}

/// A command's arguments copied out of a query buffer.
#[derive(Debug, Default, Clone)]
pub struct OwnedCommand {
    pub data: Vec<u8>,
    pub ranges: Vec<(usize, usize)>,
}

impl OwnedCommand {
    pub fn from_args(args: crate::commands::Args) -> OwnedCommand {
        let mut c = OwnedCommand::default();
        for a in args.iter() {
            c.ranges.push((c.data.len(), a.len()));
            c.data.extend_from_slice(a);
        }
        c
    }
    pub fn args(&self) -> crate::commands::Args<'_> {
        crate::commands::Args::new(&self.data, &self.ranges)
    }
    pub fn bytes(&self) -> usize {
        self.data.len() + self.ranges.len() * 16
    }
}

/// MULTI's queue (Redis's multiState).
#[derive(Debug, Default)]
pub struct MultiState {
    pub cmds: Vec<OwnedCommand>,
    /// Union of the queued commands' flags (EXEC is checked as a write / denyoom command
    /// when it holds one).
    pub flags: u32,
    /// A command was rejected while queueing: EXEC answers EXECABORT (CLIENT_DIRTY_EXEC).
    pub error: bool,
    /// Bytes queued (bounded by `client-query-buffer-limit`).
    pub bytes: usize,
}

impl Client {
    pub fn new(id: u64, addr: String, laddr: String, now_ms: i64) -> Client {
        Client {
            id,
            conn_id: 0,
            name: None,
            db: 0,
            resp: Resp::V2,
            authenticated: false,
            user: 0,
            user_name: b"default".to_vec(),
            reply_mode: ReplyMode::On,
            no_evict: false,
            memory: Default::default(),
            evicted: false,
            addr,
            laddr,
            fd: -1,
            created_ms: now_ms,
            last_interaction_ms: now_ms,
            last_cmd: "NULL",
            last_cmd_parent: None,
            http_guard_close: false,
            close_after_reply: false,
            qbuf_bytes: 0,
            bufs: BufFigures::default(),
            argv_bytes: 0,
            obuf_bytes: 0,
            obuf_soft_since_ms: 0,
            slot: 0,
            sub_channels: HashSet::new(),
            sub_patterns: Vec::new(),
            sub_shard: HashSet::new(),
            pushed: Vec::new(),
            in_pending: false,
            monitor: false,
            close_asap: false,
            keep_output_to: None,
            blocked: false,
            deferred: Default::default(),
            multi: None,
            watched: Vec::new(),
            in_exec: None,
            tracking: None,
            unix_socket: false,
            replica: false,
            repl_listening_port: 0,
            repl_capa_eof: false,
            repl_capa_image: false,
            repl_rdb_only: false,
            woff: 0,
            master: false,
        }
    }

    /// Channel plus pattern subscriptions (the count SUBSCRIBE/PSUBSCRIBE confirm).
    pub fn subscriptions(&self) -> usize {
        self.sub_channels.len() + self.sub_patterns.len()
    }

    /// Redis's CLIENT_PUBSUB flag: subscribed to anything, shard channels included
    /// (RESP2 subscribed context, the `pubsub` output buffer class).
    pub fn is_pubsub(&self) -> bool {
        self.subscriptions() + self.sub_shard.len() > 0
    }

    /// Connected over loopback (for `enable-debug-command local` and
    /// `enable-protected-configs local`).
    pub fn is_local(&self) -> bool {
        self.addr
            .parse::<std::net::SocketAddr>()
            .is_ok_and(|a| crate::util::is_loopback(a.ip()))
    }

    /// One CLIENT LIST / CLIENT INFO line (without the trailing newline).
    /// The client's type as CLIENT LIST / KILL TYPE and the output limits see it (Redis's
    /// getClientType: a replica's link, else pub/sub, else normal).
    pub fn class(&self) -> &'static str {
        if self.master {
            "master"
        } else if self.replica && !self.monitor {
            "replica"
        } else if self.is_pubsub() {
            "pubsub"
        } else {
            "normal"
        }
    }

    pub fn info_line(&self, now_ms: i64) -> String {
        let flags = {
            let mut f = String::new();
            if self.replica {
                f.push('S');
            }
            if self.master {
                f.push('M');
            }
            if self.monitor {
                f.push('O');
            }
            if self.is_pubsub() {
                f.push('P');
            }
            if self.multi.is_some() || self.in_exec.is_some() {
                f.push('x');
            }
            if self.blocked {
                f.push('b');
            }
            if let Some(t) = &self.tracking {
                f.push('t');
                if t.broken_redirect {
                    f.push('R');
                }
                if t.bcast {
                    f.push('B');
                }
            }
            if self.close_after_reply {
                f.push('c');
            }
            if self.close_asap {
                f.push('A');
            }
            if self.unix_socket {
                f.push('U');
            }
            if self.no_evict {
                f.push('e');
            }
            if f.is_empty() {
                f.push('N');
            }
            f
        };
        let name = self
            .name
            .as_ref()
            .map(|n| String::from_utf8_lossy(n).into_owned())
            .unwrap_or_default();
        let b = self.bufs;
        let qbuf_free = b.qbuf_capacity_bytes.saturating_sub(self.qbuf_bytes);
        // Queued commands' arguments and their per-argument pointers, as Redis counts
        // its multi state.
        let multi_mem: u64 = self.multi.as_ref().map_or(0, |m| {
            m.cmds
                .iter()
                .map(|c| (c.data.len() + c.ranges.len() * 8) as u64)
                .sum()
        });
        // Referenced values waiting to be written (the owned buffer is `obl`).
        let omem = self.obuf_bytes.saturating_sub(b.out_owned_bytes);
        // What this client holds: its buffers' allocations, referenced output, its
        // command's arguments, queued commands, subscriptions and its own struct.
        let subs: u64 = self
            .sub_channels
            .iter()
            .chain(self.sub_shard.iter())
            .chain(self.sub_patterns.iter())
            .map(|c| c.len() as u64 + 32)
            .sum();
        let tot_mem = b.qbuf_capacity_bytes.max(self.qbuf_bytes)
            + b.out_capacity_bytes
            + omem
            + self.argv_bytes
            + b.parsed_arg_bytes
            + multi_mem
            + subs
            + std::mem::size_of::<Client>() as u64
            + self.pushed.capacity() as u64;
        format!(
            "id={} addr={} laddr={} fd={} name={} age={} idle={} flags={} db={} sub={} psub={} ssub={} multi={} qbuf={} qbuf-free={} argv-mem={} multi-mem={} rbs={} rbp={} obl={} oll={} omem={} tot-mem={} events=r cmd={} user={} redir={} resp={}",
            self.id,
            self.addr,
            self.laddr,
            self.fd,
            name,
            (now_ms - self.created_ms) / 1000,
            (now_ms - self.last_interaction_ms) / 1000,
            flags,
            self.db,
            self.sub_channels.len(),
            self.sub_patterns.len(),
            self.sub_shard.len(),
            self.in_exec
                .map(|n| n as i64)
                .or(self.multi.as_ref().map(|m| m.cmds.len() as i64))
                .unwrap_or(-1),
            self.qbuf_bytes,
            qbuf_free,
            self.argv_bytes + b.parsed_arg_bytes,
            multi_mem,
            b.out_capacity_bytes,
            b.out_peak_bytes,
            b.out_owned_bytes,
            b.out_refs,
            omem,
            tot_mem,
            match (self.in_exec, self.last_cmd_parent) {
                (Some(_), _) => "exec".to_string(),
                (None, Some(p)) => format!("{p}|{}", self.last_cmd),
                (None, None) => self.last_cmd.to_string(),
            },
            String::from_utf8_lossy(&self.user_name),
            self.tracking.as_ref().map_or(-1, |t| t.redirect as i64),
            match self.resp {
                Resp::V2 => 2,
                Resp::V3 => 3,
            }
        )
    }
}

/// The limit check for `pending` unsent bytes (hard at once, soft after its seconds);
/// counts a disconnection when over. Pub/sub delivery also calls it for the outbox.
pub fn output_over_bytes(
    lim: crate::config::OutputLimit,
    stats: &mut crate::commands::executor::stats::Stats,
    client: &mut crate::commands::executor::Client,
    pending: u64,
) -> bool {
    let now = crate::util::now_ms();
    let mut over = lim.hard_bytes > 0 && pending >= lim.hard_bytes;
    if lim.soft_bytes > 0 && pending >= lim.soft_bytes {
        if client.obuf_soft_since_ms == 0 {
            client.obuf_soft_since_ms = now;
        } else if now - client.obuf_soft_since_ms >= lim.soft_seconds as i64 * 1000 {
            over = true;
        }
    } else {
        client.obuf_soft_since_ms = 0;
    }
    if over {
        stats.client_output_buffer_limit_disconnections += 1;
        crate::warning!(
            "Client {} scheduled to be closed ASAP for overcoming of output buffer limits.",
            client.info_line(now)
        );
    }
    over
}
