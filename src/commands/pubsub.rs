//! Pub/sub: SUBSCRIBE, UNSUBSCRIBE, PSUBSCRIBE, PUNSUBSCRIBE, PUBLISH, PUBSUB, and the
//! sharded forms SSUBSCRIBE, SUNSUBSCRIBE, SPUBLISH (one shard: standalone Redis 7.0).
//!
//! The executor owns the subscription tables ([`PubSub`], in `Server::pubsub`) and each
//! client's own subscriptions (`Client::sub_channels` / `sub_patterns`). PUBLISH never
//! touches another client's socket: it appends the encoded message to that client's
//! outbox (`Client::pushed`) and queues its slot in [`PubSub::pending`]; the socket side
//! (event loop or I/O threads) moves the outbox into the connection's output after each
//! turn, and before running that client's next commands so its output stays in order.
//! A message for the publishing client itself goes straight into its reply, before the
//! PUBLISH count, as Redis does.
//!
//! The outbox is bounded by `client-output-buffer-limit pubsub`: a push that takes a
//! client's unsent output (connection buffer + outbox) over the limit drops the outbox
//! and marks the client to be closed (`Client::close_asap`); it keeps counting as a
//! receiver until the socket side has closed it, as in Redis.

use super::{
    Args, CmdError, CmdResult, CommandSpec, Ctx, ADMIN, FAST, LOADING, MAY_REPLICATE, NOSCRIPT,
    PUBSUB, PUBSUB_OK, STALE,
};
use crate::commands::executor::{Client, Server};
use crate::protocol::reply::{Reply, Resp};
use std::collections::HashMap;

const SUBSCRIBE_FLAGS: u32 = PUBSUB | NOSCRIPT | LOADING | STALE | PUBSUB_OK;
const INTROSPECT: u32 = PUBSUB | LOADING | STALE;

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new("subscribe", -2, SUBSCRIBE_FLAGS, "pubsub", subscribe).doc(
        "Listen for messages published to the given channels",
        "2.0.0",
    ),
    CommandSpec::new("unsubscribe", -1, SUBSCRIBE_FLAGS, "pubsub", unsubscribe).doc(
        "Stop listening for messages posted to the given channels",
        "2.0.0",
    ),
    CommandSpec::new("psubscribe", -2, SUBSCRIBE_FLAGS, "pubsub", psubscribe).doc(
        "Listen for messages published to channels matching the given patterns",
        "2.0.0",
    ),
    CommandSpec::new("punsubscribe", -1, SUBSCRIBE_FLAGS, "pubsub", punsubscribe).doc(
        "Stop listening for messages posted to channels matching the given patterns",
        "2.0.0",
    ),
    CommandSpec::new(
        "monitor",
        1,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "server",
        monitor,
    )
    .doc(
        "Listen for all requests received by the server in real-time",
        "1.0.0",
    ),
    CommandSpec::new(
        "publish",
        3,
        PUBSUB | LOADING | STALE | FAST | MAY_REPLICATE,
        "pubsub",
        publish,
    )
    .doc("Post a message to a channel", "2.0.0"),
    CommandSpec::new("ssubscribe", -2, SUBSCRIBE_FLAGS, "pubsub", ssubscribe)
        .keys(1, -1, 1)
        .doc(
            "Listen for messages published to the given shard channels",
            "7.0.0",
        ),
    CommandSpec::new("sunsubscribe", -1, SUBSCRIBE_FLAGS, "pubsub", sunsubscribe)
        .keys(1, -1, 1)
        .doc(
            "Stop listening for messages posted to the given shard channels",
            "7.0.0",
        ),
    CommandSpec::new(
        "spublish",
        3,
        PUBSUB | LOADING | STALE | FAST | MAY_REPLICATE,
        "pubsub",
        spublish,
    )
    .keys(1, 1, 1)
    .doc("Post a message to a shard channel", "7.0.0"),
    CommandSpec::new("pubsub", -2, 0, "pubsub", pubsub_help)
        .doc("A container for Pub/Sub commands", "2.8.0")
        .subs(PUBSUB_SUBS),
];

static PUBSUB_SUBS: &[CommandSpec] = &[
    CommandSpec::new("channels", -2, INTROSPECT, "pubsub", pubsub_channels)
        .doc("List active channels", "2.8.0"),
    CommandSpec::new("numpat", 2, INTROSPECT, "pubsub", pubsub_numpat).doc(
        "Get the count of unique patterns pattern subscriptions",
        "2.8.0",
    ),
    CommandSpec::new("numsub", -2, INTROSPECT, "pubsub", pubsub_numsub)
        .doc("Get the count of subscribers for channels", "2.8.0"),
    CommandSpec::new(
        "shardchannels",
        -2,
        INTROSPECT,
        "pubsub",
        pubsub_shardchannels,
    )
    .doc("List active shard channels", "7.0.0"),
    CommandSpec::new("shardnumsub", -2, INTROSPECT, "pubsub", pubsub_shardnumsub)
        .doc("Get the count of subscribers for shard channels", "7.0.0"),
    CommandSpec::new("help", 2, LOADING | STALE, "pubsub", pubsub_help)
        .doc("Show helpful text about the different subcommands", "6.2.0"),
];

/// A subscriber: its slot in `Server::clients` and its id (slots are reused).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sub {
    pub slot: usize,
    pub id: u64,
}

/// Server-wide subscription tables (executor-owned).
#[derive(Default, Debug)]
pub struct PubSub {
    /// Channel → subscribers in subscription order.
    pub channels: HashMap<Vec<u8>, Vec<Sub>>,
    /// Shard channel → subscribers (SSUBSCRIBE; one shard: cairn is not a cluster).
    pub shard_channels: HashMap<Vec<u8>, Vec<Sub>>,
    /// Pattern → subscribers (PUBSUB NUMPAT counts distinct patterns, as Redis 7.0).
    pub patterns: HashMap<Vec<u8>, Vec<Sub>>,
    /// Slots of clients with bytes in their outbox or marked `close_asap`; drained by the
    /// socket side every turn. Each slot appears once (`Client::in_pending`).
    pub pending: Vec<usize>,
    /// Clients in MONITOR mode, in the order they entered it.
    pub monitors: Vec<Sub>,
}

/// The RESP2 "subscribed context" error, Redis 7.0's exact text.
pub fn context_error(full_name: &str) -> String {
    format!(
        "ERR Can't execute '{full_name}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context"
    )
}

/// A confirmation frame: `[kind, name-or-null, count]`, a push in RESP3.
fn confirm(out: &mut Reply, kind: &str, name: Option<&[u8]>, count: usize) {
    out.push(3);
    out.bulk_str(kind);
    match name {
        Some(n) => out.bulk(n),
        None => out.null(),
    }
    out.int(count as i64);
}

/// Marks the output of this command (so far) as pub/sub output, which Redis 7.0 sends
/// even under CLIENT REPLY OFF/SKIP.
fn keep_output(ctx: &mut Ctx) {
    ctx.client.keep_output_to = Some(ctx.out.buf.len());
}

/// Plain channels (SUBSCRIBE/PUBLISH) or shard channels (SSUBSCRIBE/SPUBLISH): the same
/// mechanics on separate tables; the confirmation counts differ (a shard confirmation
/// counts shard channels only, a plain one channels plus patterns, as Redis 7.0).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Plain,
    Shard,
}

impl Kind {
    fn names(self) -> (&'static str, &'static str) {
        match self {
            Kind::Plain => ("subscribe", "unsubscribe"),
            Kind::Shard => ("ssubscribe", "sunsubscribe"),
        }
    }
    fn count(self, c: &Client) -> usize {
        match self {
            Kind::Plain => c.subscriptions(),
            Kind::Shard => c.sub_shard.len(),
        }
    }
}

fn client_set(c: &mut Client, kind: Kind) -> &mut std::collections::HashSet<Vec<u8>> {
    match kind {
        Kind::Plain => &mut c.sub_channels,
        Kind::Shard => &mut c.sub_shard,
    }
}

fn server_map(srv: &mut Server, kind: Kind) -> &mut HashMap<Vec<u8>, Vec<Sub>> {
    match kind {
        Kind::Plain => &mut srv.pubsub.channels,
        Kind::Shard => &mut srv.pubsub.shard_channels,
    }
}

fn subscribe_kind(ctx: &mut Ctx, kind: Kind) -> CmdResult {
    let me = Sub {
        slot: ctx.client.slot,
        id: ctx.client.id,
    };
    let (word, _) = kind.names();
    for i in 1..ctx.args.len() {
        let ch = ctx.args.get(i);
        if client_set(ctx.client, kind).insert(ch.to_vec()) {
            server_map(ctx.srv, kind)
                .entry(ch.to_vec())
                .or_default()
                .push(me);
        }
        let n = kind.count(ctx.client);
        confirm(&mut ctx.out, word, Some(ch), n);
    }
    keep_output(ctx);
    Ok(())
}

fn subscribe(ctx: &mut Ctx) -> CmdResult {
    subscribe_kind(ctx, Kind::Plain)
}

fn ssubscribe(ctx: &mut Ctx) -> CmdResult {
    subscribe_kind(ctx, Kind::Shard)
}

fn psubscribe(ctx: &mut Ctx) -> CmdResult {
    let me = Sub {
        slot: ctx.client.slot,
        id: ctx.client.id,
    };
    for i in 1..ctx.args.len() {
        let pat = ctx.args.get(i);
        if !ctx.client.sub_patterns.iter().any(|p| p == pat) {
            ctx.client.sub_patterns.push(pat.to_vec());
            ctx.srv
                .pubsub
                .patterns
                .entry(pat.to_vec())
                .or_default()
                .push(me);
        }
        let n = ctx.client.subscriptions();
        confirm(&mut ctx.out, "psubscribe", Some(pat), n);
    }
    keep_output(ctx);
    Ok(())
}

/// Removes `id` from `name`'s subscriber list, dropping the entry when it empties.
fn remove_sub(map: &mut HashMap<Vec<u8>, Vec<Sub>>, name: &[u8], id: u64) {
    if let Some(list) = map.get_mut(name) {
        list.retain(|s| s.id != id);
        if list.is_empty() {
            map.remove(name);
        }
    }
}

fn unsubscribe_kind(ctx: &mut Ctx, kind: Kind) -> CmdResult {
    let id = ctx.client.id;
    let (_, word) = kind.names();
    if ctx.args.len() == 1 {
        let all: Vec<Vec<u8>> = client_set(ctx.client, kind).drain().collect();
        if all.is_empty() {
            let n = kind.count(ctx.client);
            confirm(&mut ctx.out, word, None, n);
        }
        // The count as each one goes (the set is already empty).
        let others = kind.count(ctx.client);
        for (i, ch) in all.iter().enumerate() {
            remove_sub(server_map(ctx.srv, kind), ch, id);
            confirm(&mut ctx.out, word, Some(ch), all.len() - i - 1 + others);
        }
    } else {
        for i in 1..ctx.args.len() {
            let ch = ctx.args.get(i);
            if client_set(ctx.client, kind).remove(ch) {
                remove_sub(server_map(ctx.srv, kind), ch, id);
            }
            let n = kind.count(ctx.client);
            confirm(&mut ctx.out, word, Some(ch), n);
        }
    }
    keep_output(ctx);
    Ok(())
}

fn unsubscribe(ctx: &mut Ctx) -> CmdResult {
    unsubscribe_kind(ctx, Kind::Plain)
}

fn sunsubscribe(ctx: &mut Ctx) -> CmdResult {
    unsubscribe_kind(ctx, Kind::Shard)
}

fn punsubscribe(ctx: &mut Ctx) -> CmdResult {
    let id = ctx.client.id;
    if ctx.args.len() == 1 {
        let all = std::mem::take(&mut ctx.client.sub_patterns);
        if all.is_empty() {
            let n = ctx.client.subscriptions();
            confirm(&mut ctx.out, "punsubscribe", None, n);
        }
        for (i, pat) in all.iter().enumerate() {
            remove_sub(&mut ctx.srv.pubsub.patterns, pat, id);
            let n = all.len() - i - 1 + ctx.client.sub_channels.len();
            confirm(&mut ctx.out, "punsubscribe", Some(pat), n);
        }
    } else {
        for i in 1..ctx.args.len() {
            let pat = ctx.args.get(i);
            if let Some(pos) = ctx.client.sub_patterns.iter().position(|p| p == pat) {
                ctx.client.sub_patterns.remove(pos);
                remove_sub(&mut ctx.srv.pubsub.patterns, pat, id);
            }
            let n = ctx.client.subscriptions();
            confirm(&mut ctx.out, "punsubscribe", Some(pat), n);
        }
    }
    keep_output(ctx);
    Ok(())
}

/// Drops every subscription of `client` without replies (RESET, disconnect).
pub fn unsubscribe_all(srv: &mut Server, client: &mut Client) {
    let id = client.id;
    for ch in client.sub_channels.drain() {
        remove_sub(&mut srv.pubsub.channels, &ch, id);
    }
    for pat in std::mem::take(&mut client.sub_patterns) {
        remove_sub(&mut srv.pubsub.patterns, &pat, id);
    }
    for ch in client.sub_shard.drain() {
        remove_sub(&mut srv.pubsub.shard_channels, &ch, id);
    }
    client.pushed = Vec::new();
    if client.monitor {
        client.monitor = false;
        srv.pubsub.monitors.retain(|m| m.id != id);
    }
}

/// MONITOR: from now on every command the server runs is copied to this client.
fn monitor(ctx: &mut Ctx) -> CmdResult {
    // Redis 7: a client that expects a reply per command (inside EXEC) cannot monitor.
    if ctx.srv.in_exec {
        return Err(CmdError::raw(
            "ERR MONITOR isn't allowed for DENY BLOCKING client",
        ));
    }
    if !ctx.client.monitor {
        ctx.client.monitor = true;
        let sub = Sub {
            slot: ctx.client.slot,
            id: ctx.client.id,
        };
        ctx.srv.pubsub.monitors.push(sub);
    }
    ctx.out.ok();
    Ok(())
}

/// Copies a command that ran to every client in MONITOR mode but its sender, as Redis's
/// replicationFeedMonitors: `+<s>.<us> [<db> <address>] "arg" ...`, the address `lua` for
/// a command a script ran. Each monitor's copy is bounded by `client-output-buffer-limit
/// normal` (a monitor is a normal client there).
pub fn feed_monitors(srv: &mut Server, from: &Client, db: usize, args: Args, from_script: bool) {
    let now = crate::util::now_us();
    let mut line = format!(
        "+{}.{:06} [{db} {}]",
        now / 1_000_000,
        now % 1_000_000,
        if from_script {
            "lua"
        } else {
            from.addr.as_str()
        }
    )
    .into_bytes();
    for i in 0..args.len() {
        line.push(b' ');
        quote_repr(&mut line, args.get(i));
    }
    line.extend_from_slice(b"\r\n");
    let lim = srv.config.settings().obuf_normal;
    for m in srv.pubsub.monitors.clone() {
        if m.id == from.id {
            continue;
        }
        push_to_outbox(srv, m.slot, m.id, lim, |buf, _| {
            buf.extend_from_slice(&line)
        });
    }
}

/// Appends to the outbox of client `id` at `slot` what `write` encodes for it (given its
/// protocol), within output limit `lim`: a client that goes over it is marked to close and
/// gets nothing more (Redis drops writes to a client scheduled for closing). The socket
/// side moves outboxes into connections after each turn (`PubSub::pending`).
pub fn push_to_outbox(
    srv: &mut Server,
    slot: usize,
    id: u64,
    lim: crate::config::OutputLimit,
    write: impl FnOnce(&mut Vec<u8>, Resp),
) {
    let Some(c) = srv.clients.get_mut(slot).and_then(|c| c.as_mut()) else {
        return;
    };
    if c.id != id || c.close_asap {
        return;
    }
    let resp = c.resp;
    write(&mut c.pushed, resp);
    let unsent = c
        .obuf_bytes
        .saturating_add(c.pushed.len() as u64)
        .saturating_add(c.memory.unsent_output_bytes());
    if crate::commands::executor::client::output_over_bytes(lim, &mut srv.stats, c, unsent) {
        c.close_asap = true;
        c.pushed = Vec::new();
    }
    if !c.in_pending {
        c.in_pending = true;
        srv.pubsub.pending.push(slot);
    }
}

/// Redis's sdscatrepr: the bytes in double quotes, `\\ \" \n \r \t \a \b` escaped,
/// other bytes outside printable ASCII as `\xHH`.
fn quote_repr(out: &mut Vec<u8>, b: &[u8]) {
    out.push(b'"');
    for &c in b {
        match c {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'"' => out.extend_from_slice(b"\\\""),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x07 => out.extend_from_slice(b"\\a"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x20..=0x7e => out.push(c),
            _ => out.extend_from_slice(format!("\\x{c:02x}").as_bytes()),
        }
    }
    out.push(b'"');
}

/// What a delivered message is: `message`, `pmessage` (with its pattern), `smessage`.
#[derive(Clone, Copy)]
enum Frame<'a> {
    Message,
    PMessage(&'a [u8]),
    SMessage,
}

/// Encodes a message frame for a client speaking `resp`.
fn encode_message(buf: &mut Vec<u8>, resp: Resp, frame: Frame, ch: &[u8], msg: &[u8]) {
    let mut r = Reply::new(buf, resp);
    match frame {
        Frame::Message => {
            r.push(3);
            r.bulk(b"message");
        }
        Frame::SMessage => {
            r.push(3);
            r.bulk(b"smessage");
        }
        Frame::PMessage(p) => {
            r.push(4);
            r.bulk(b"pmessage");
            r.bulk(p);
        }
    }
    r.bulk(ch);
    r.bulk(msg);
}

/// Appends a message to subscriber `sub`'s output. The publisher itself gets it in its
/// reply; anyone else in its outbox, within `client-output-buffer-limit pubsub`.
fn deliver(ctx: &mut Ctx, sub: Sub, frame: Frame, ch: &[u8], msg: &[u8]) {
    if sub.id == ctx.client.id {
        let resp = ctx.client.resp;
        encode_message(ctx.out.buf, resp, frame, ch, msg);
        keep_output(ctx);
        return;
    }
    deliver_other(ctx.srv, sub, frame, ch, msg);
}

/// Appends a message to the outbox of subscriber `sub`, a client other than the one
/// running, within `client-output-buffer-limit pubsub`.
fn deliver_other(srv: &mut Server, sub: Sub, frame: Frame, ch: &[u8], msg: &[u8]) {
    let lim = srv.config.settings().obuf_pubsub;
    push_to_outbox(srv, sub.slot, sub.id, lim, |buf, resp| {
        encode_message(buf, resp, frame, ch, msg)
    });
}

fn publish(ctx: &mut Ctx) -> CmdResult {
    let ch = ctx.args.get(1);
    let msg = ctx.args.get(2);
    let mut receivers = 0i64;
    // Subscriber lists are copied out (small) so delivery can borrow the clients.
    if let Some(list) = ctx.srv.pubsub.channels.get(ch) {
        let list = list.clone();
        for sub in list {
            deliver(ctx, sub, Frame::Message, ch, msg);
            receivers += 1;
        }
    }
    if !ctx.srv.pubsub.patterns.is_empty() {
        let matching: Vec<(Vec<u8>, Vec<Sub>)> = ctx
            .srv
            .pubsub
            .patterns
            .iter()
            .filter(|(p, _)| crate::util::glob_match(p, ch, false))
            .map(|(p, l)| (p.clone(), l.clone()))
            .collect();
        for (pat, list) in matching {
            for sub in list {
                deliver(ctx, sub, Frame::PMessage(&pat), ch, msg);
                receivers += 1;
            }
        }
    }
    ctx.out.int(receivers);
    Ok(())
}

/// The running client, as a receiver of messages the server publishes: its id, protocol,
/// and the buffer its messages go to.
pub struct SelfSink<'a> {
    pub id: u64,
    pub resp: Resp,
    pub buf: &'a mut Vec<u8>,
}

/// True when a message published on `ch` would reach anyone (a channel subscriber or
/// any pattern: patterns are matched only when there is something to publish).
pub fn has_receivers(srv: &Server, ch: &[u8]) -> bool {
    !srv.pubsub.patterns.is_empty() || srv.pubsub.channels.contains_key(ch)
}

/// Publishes a message the server itself sends (keyspace notifications), as PUBLISH
/// would: channel subscribers, then pattern subscribers. A message for the running
/// client (`me`) goes to its sink; everyone else's to their outbox.
pub fn publish_from_server(srv: &mut Server, mut me: Option<&mut SelfSink>, ch: &[u8], msg: &[u8]) {
    let mut send = |srv: &mut Server, sub: Sub, frame: Frame| match me.as_deref_mut() {
        Some(m) if m.id == sub.id => encode_message(m.buf, m.resp, frame, ch, msg),
        _ => deliver_other(srv, sub, frame, ch, msg),
    };
    if let Some(list) = srv.pubsub.channels.get(ch) {
        for sub in list.clone() {
            send(srv, sub, Frame::Message);
        }
    }
    if !srv.pubsub.patterns.is_empty() {
        let matching: Vec<(Vec<u8>, Vec<Sub>)> = srv
            .pubsub
            .patterns
            .iter()
            .filter(|(p, _)| crate::util::glob_match(p, ch, false))
            .map(|(p, l)| (p.clone(), l.clone()))
            .collect();
        for (pat, list) in matching {
            for sub in list {
                send(srv, sub, Frame::PMessage(&pat));
            }
        }
    }
}

/// Publishes keyspace event `event` of `class` for `key` of `db` on the channels
/// `notify-keyspace-events` asks for (`commands::notify` decides when).
pub fn publish_keyspace_event(
    srv: &mut Server,
    mut me: Option<&mut SelfSink>,
    class: u32,
    event: &str,
    key: &[u8],
    db: usize,
) {
    use crate::config::{NOTIFY_KEYEVENT, NOTIFY_KEYSPACE};
    let flags = srv.notify_flags;
    if flags & class == 0 {
        return;
    }
    let db_text = db.to_string();
    let channel = |prefix: &[u8], tail: &[u8]| {
        let mut ch = Vec::with_capacity(prefix.len() + db_text.len() + 3 + tail.len());
        ch.extend_from_slice(prefix);
        ch.extend_from_slice(db_text.as_bytes());
        ch.extend_from_slice(b"__:");
        ch.extend_from_slice(tail);
        ch
    };
    if flags & NOTIFY_KEYSPACE != 0 {
        let ch = channel(b"__keyspace@", key);
        if has_receivers(srv, &ch) {
            publish_from_server(srv, me.as_deref_mut(), &ch, event.as_bytes());
        }
    }
    if flags & NOTIFY_KEYEVENT != 0 {
        let ch = channel(b"__keyevent@", event.as_bytes());
        if has_receivers(srv, &ch) {
            publish_from_server(srv, me, &ch, key);
        }
    }
}

/// Publishes what the keyspace recorded (expiry, eviction...) outside any command (cron).
pub fn publish_recorded_events(srv: &mut Server) {
    if srv.ks.events.events.is_empty() {
        return;
    }
    for ev in srv.ks.events.take() {
        let (class, name) = super::notify::kind_event(ev.kind);
        publish_keyspace_event(srv, None, class, name, &ev.key, ev.db);
    }
}

fn spublish(ctx: &mut Ctx) -> CmdResult {
    let ch = ctx.args.get(1);
    let msg = ctx.args.get(2);
    let list = ctx
        .srv
        .pubsub
        .shard_channels
        .get(ch)
        .cloned()
        .unwrap_or_default();
    for &sub in &list {
        deliver(ctx, sub, Frame::SMessage, ch, msg);
    }
    ctx.out.int(list.len() as i64);
    Ok(())
}

fn list_channels(ctx: &mut Ctx, kind: Kind) -> CmdResult {
    if ctx.args.len() > 3 {
        return Err(subcommand_syntax(ctx));
    }
    let pat = (ctx.args.len() == 3).then(|| ctx.args.get(2));
    let names: Vec<&Vec<u8>> = server_map(ctx.srv, kind)
        .keys()
        .filter(|c| pat.is_none_or(|p| crate::util::glob_match(p, c, false)))
        .collect();
    ctx.out.array(names.len());
    for n in names {
        ctx.out.bulk(n);
    }
    Ok(())
}

fn count_subscribers(ctx: &mut Ctx, kind: Kind) -> CmdResult {
    // A flat array in RESP3 too (Redis 7.0 does not send a map here).
    let n = ctx.args.len() - 2;
    ctx.out.array(2 * n);
    for i in 2..ctx.args.len() {
        let ch = ctx.args.get(i);
        ctx.out.bulk(ch);
        let count = server_map(ctx.srv, kind).get(ch).map_or(0, |l| l.len());
        ctx.out.int(count as i64);
    }
    Ok(())
}

fn pubsub_channels(ctx: &mut Ctx) -> CmdResult {
    list_channels(ctx, Kind::Plain)
}

fn pubsub_numsub(ctx: &mut Ctx) -> CmdResult {
    count_subscribers(ctx, Kind::Plain)
}

fn pubsub_shardchannels(ctx: &mut Ctx) -> CmdResult {
    list_channels(ctx, Kind::Shard)
}

fn pubsub_shardnumsub(ctx: &mut Ctx) -> CmdResult {
    count_subscribers(ctx, Kind::Shard)
}

fn pubsub_numpat(ctx: &mut Ctx) -> CmdResult {
    ctx.out.int(ctx.srv.pubsub.patterns.len() as i64);
    Ok(())
}

/// Redis's addReplySubcommandSyntaxError (names the subcommand as the client typed it).
fn subcommand_syntax(ctx: &Ctx) -> CmdError {
    let sub: String = ctx.args.str(1).chars().take(128).collect();
    CmdError::err(format!(
        "unknown subcommand or wrong number of arguments for '{sub}'. Try PUBSUB HELP."
    ))
}

fn pubsub_help(ctx: &mut Ctx) -> CmdResult {
    if ctx.args.len() == 1 {
        return Err(CmdError::err(
            "wrong number of arguments for 'pubsub' command",
        ));
    }
    let lines = [
        "PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "CHANNELS [<pattern>]",
        "    Return the currently active channels matching a <pattern> (default: '*').",
        "NUMPAT",
        "    Return number of subscriptions to patterns.",
        "NUMSUB [<channel> ...]",
        "    Return the number of subscribers for the specified channels, excluding",
        "    pattern subscriptions(default: no channels).",
        "SHARDCHANNELS [<pattern>]",
        "    Return the currently active shard level channels matching a <pattern> (default: '*').",
        "SHARDNUMSUB [<shardchannel> ...]",
        "    Return the number of subscribers for the specified shard level channel(s)",
        "HELP",
        "    Prints this help.",
    ];
    ctx.out.array(lines.len());
    for l in lines {
        ctx.out.simple(l);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_frames() {
        let mut b = Vec::new();
        encode_message(&mut b, Resp::V2, Frame::Message, b"c", b"hi");
        assert_eq!(b, b"*3\r\n$7\r\nmessage\r\n$1\r\nc\r\n$2\r\nhi\r\n");
        b.clear();
        encode_message(&mut b, Resp::V3, Frame::PMessage(b"c*"), b"c", b"");
        assert_eq!(
            b,
            b">4\r\n$8\r\npmessage\r\n$2\r\nc*\r\n$1\r\nc\r\n$0\r\n\r\n"
        );
    }

    #[test]
    fn hard_limit_is_reached_at_exactly_n_bytes() {
        let lim = crate::config::OutputLimit {
            hard_bytes: 1000,
            soft_bytes: 0,
            soft_seconds: 0,
        };
        let mut stats = crate::commands::executor::stats::Stats::default();
        let mut c = Client::new(1, String::new(), String::new(), 0);
        let over = crate::commands::executor::client::output_over_bytes;
        assert!(!over(lim, &mut stats, &mut c, 999));
        assert_eq!(stats.client_output_buffer_limit_disconnections, 0);
        // Redis: used >= hard limit.
        assert!(over(lim, &mut stats, &mut c, 1000));
        assert!(over(lim, &mut stats, &mut c, 1001));
        assert_eq!(stats.client_output_buffer_limit_disconnections, 2);
    }

    #[test]
    fn soft_limit_needs_its_seconds_over() {
        let lim = crate::config::OutputLimit {
            hard_bytes: 0,
            soft_bytes: 100,
            soft_seconds: 3600,
        };
        let mut stats = crate::commands::executor::stats::Stats::default();
        let mut c = Client::new(1, String::new(), String::new(), 0);
        let over = crate::commands::executor::client::output_over_bytes;
        assert!(!over(lim, &mut stats, &mut c, 100));
        assert!(c.obuf_soft_since_ms > 0);
        assert!(!over(lim, &mut stats, &mut c, 5000));
        // Back under the soft limit: the timer restarts.
        assert!(!over(lim, &mut stats, &mut c, 99));
        assert_eq!(c.obuf_soft_since_ms, 0);
        c.obuf_soft_since_ms = 1;
        assert!(over(lim, &mut stats, &mut c, 100));
    }

    #[test]
    fn remove_sub_drops_empty_entries() {
        let mut m: HashMap<Vec<u8>, Vec<Sub>> = HashMap::new();
        m.entry(b"a".to_vec())
            .or_default()
            .push(Sub { slot: 0, id: 1 });
        m.entry(b"a".to_vec())
            .or_default()
            .push(Sub { slot: 1, id: 2 });
        remove_sub(&mut m, b"a", 1);
        assert_eq!(m[&b"a".to_vec()], vec![Sub { slot: 1, id: 2 }]);
        remove_sub(&mut m, b"a", 2);
        assert!(m.is_empty());
    }
}
