//! Keyspace notifications (`notify-keyspace-events`): events published on
//! `__keyspace@<db>__:<key>` (message: the event) and `__keyevent@<db>__:<event>`
//! (message: the key) through pub/sub, with Redis 7.0's event names and classes.
//!
//! Command handlers call [`notify`] (or [`notify_db`]) where Redis calls
//! notifyKeyspaceEvent, with the same class and name; with notifications off that is one
//! test of `Server::notify_flags`. Events the keyspace causes by itself (lazy and active
//! expiry, eviction, a read miss, a key created) are recorded by the keyspace
//! (`keyspace::events`) and published from here: before a command runs (eviction came
//! first), before each event a command publishes (so a lazily expired or newly created
//! key's event precedes the command's own, as in Redis), after the command, and after
//! cron's expiry and eviction.
//!
//! A notification for the running client itself (a RESP3 client subscribed to its own
//! keys) goes into its reply when the command has written nothing yet, as Redis does;
//! otherwise (part of a reply written, inside EXEC, from a script) it waits in
//! `Server::notify_self` and follows the reply, so a reply is never cut by a push.
//!
//! Helper API for command families: `notify(ctx, NOTIFY_<CLASS>, "<event>", key)`;
//! `notify_db` when the key is in another database than the client's.

use super::pubsub::{publish_keyspace_event, SelfSink};
use super::Ctx;
pub use crate::config::{
    NOTIFY_EVICTED, NOTIFY_EXPIRED, NOTIFY_GENERIC, NOTIFY_HASH, NOTIFY_KEYEVENT, NOTIFY_KEYSPACE,
    NOTIFY_KEY_MISS, NOTIFY_LIST, NOTIFY_MODULE, NOTIFY_NEW, NOTIFY_SET, NOTIFY_STREAM,
    NOTIFY_STRING, NOTIFY_ZSET,
};
use crate::keyspace::events::KeyEventKind;

/// Which keyspace-caused events the keyspace must record for `flags`.
pub fn recorded_kinds(flags: u32) -> u8 {
    if flags & (NOTIFY_KEYSPACE | NOTIFY_KEYEVENT) == 0 {
        return 0;
    }
    let mut r = 0;
    for (class, kind) in [
        (NOTIFY_EXPIRED, KeyEventKind::Expired),
        (NOTIFY_EVICTED, KeyEventKind::Evicted),
        (NOTIFY_KEY_MISS, KeyEventKind::KeyMiss),
        (NOTIFY_NEW, KeyEventKind::New),
    ] {
        if flags & class != 0 {
            r |= kind as u8;
        }
    }
    r
}

/// The class and event name of a keyspace-recorded event.
pub fn kind_event(kind: KeyEventKind) -> (u32, &'static str) {
    match kind {
        KeyEventKind::Expired => (NOTIFY_EXPIRED, "expired"),
        KeyEventKind::Evicted => (NOTIFY_EVICTED, "evicted"),
        KeyEventKind::KeyMiss => (NOTIFY_KEY_MISS, "keymiss"),
        KeyEventKind::New => (NOTIFY_NEW, "new"),
    }
}

/// Publishes `event` of `class` for `key` in the client's database, when notifications of
/// that class are on.
#[inline]
pub fn notify(ctx: &mut Ctx, class: u32, event: &str, key: &[u8]) {
    if ctx.srv.notify_flags & class != 0 {
        let db = ctx.client.db;
        emit_from_command(ctx, class, event, key, db);
    }
}

/// [`notify`] for a key of database `db` (MOVE, COPY ... DB).
#[inline]
pub fn notify_db(ctx: &mut Ctx, class: u32, event: &str, key: &[u8], db: usize) {
    if ctx.srv.notify_flags & class != 0 {
        emit_from_command(ctx, class, event, key, db);
    }
}

#[inline(never)]
fn emit_from_command(ctx: &mut Ctx, class: u32, event: &str, key: &[u8], db: usize) {
    publish_recorded(ctx);
    with_self_sink(
        ctx,
        &[Event {
            class,
            name: event,
            key,
            db,
        }],
    );
}

/// One event to publish.
struct Event<'a> {
    class: u32,
    name: &'a str,
    key: &'a [u8],
    db: usize,
}

/// Publishes `events`; the running client's own go into its reply while the command has
/// written nothing else (outside EXEC and scripts), else into the held buffer.
fn with_self_sink(ctx: &mut Ctx, events: &[Event]) {
    let srv = &mut *ctx.srv;
    let direct = !srv.in_script_call
        && !srv.in_exec
        && srv.notify_self.is_empty()
        && ctx.out.buf.len() == srv.notify_reply_start;
    if direct {
        let before = ctx.out.buf.len();
        let mut me = SelfSink {
            id: ctx.client.id,
            resp: ctx.client.resp,
            buf: ctx.out.buf,
        };
        for ev in events {
            publish_keyspace_event(srv, Some(&mut me), ev.class, ev.name, ev.key, ev.db);
        }
        let after = ctx.out.buf.len();
        if after > before {
            // Pushes pass CLIENT REPLY OFF / SKIP, as pub/sub output does.
            ctx.client.keep_output_to = Some(after);
            srv.notify_reply_start = after;
        }
    } else {
        let mut held = std::mem::take(&mut srv.notify_self);
        // Held pushes reach the connection, whose protocol a script's does not change.
        let resp = if srv.in_script_call {
            srv.notify_self_resp
        } else {
            ctx.client.resp
        };
        let mut me = SelfSink {
            id: ctx.client.id,
            resp,
            buf: &mut held,
        };
        for ev in events {
            publish_keyspace_event(srv, Some(&mut me), ev.class, ev.name, ev.key, ev.db);
        }
        srv.notify_self = held;
    }
}

/// Publishes what the keyspace recorded since the last call, oldest first.
pub fn publish_recorded(ctx: &mut Ctx) {
    if ctx.srv.ks.events.events.is_empty() {
        return;
    }
    let recorded = ctx.srv.ks.events.take();
    let events: Vec<Event> = recorded
        .iter()
        .map(|ev| {
            let (class, name) = kind_event(ev.kind);
            Event {
                class,
                name,
                key: &ev.key,
                db: ev.db,
            }
        })
        .collect();
    with_self_sink(ctx, &events);
}

/// [`publish_recorded`] after a handler: the lookups that recorded these events ran
/// before it replied, so the running client's own pushes go in front of its reply (as
/// Redis publishes them at the lookup), unless they must wait (EXEC, scripts).
fn publish_recorded_before_reply(ctx: &mut Ctx) {
    let srv = &mut *ctx.srv;
    if srv.ks.events.events.is_empty() {
        return;
    }
    let start = srv.notify_reply_start;
    let direct = !srv.in_script_call
        && !srv.in_exec
        && srv.notify_self.is_empty()
        && start <= ctx.out.buf.len();
    if !direct {
        publish_recorded(ctx);
        return;
    }
    let mut own = Vec::new();
    let mut me = SelfSink {
        id: ctx.client.id,
        resp: ctx.client.resp,
        buf: &mut own,
    };
    for ev in srv.ks.events.take() {
        let (class, name) = kind_event(ev.kind);
        publish_keyspace_event(srv, Some(&mut me), class, name, &ev.key, ev.db);
    }
    if own.is_empty() {
        return;
    }
    let n = own.len();
    ctx.out.buf.splice(start..start, own);
    // Stored values spliced into the reply by reference sit after the insertion.
    for seg in srv.reply_refs.iter_mut().filter(|s| s.pos >= start) {
        seg.pos += n;
    }
    if let Some(k) = ctx.client.keep_output_to.as_mut() {
        if *k >= start {
            *k += n;
        }
    }
    ctx.client.keep_output_to = Some(ctx.client.keep_output_to.unwrap_or(0).max(start + n));
}

/// Before a command's handler: where its reply starts, and the events recorded before it
/// (eviction to admit it). Returns the enclosing command's reply start (EXEC, EVAL), for
/// [`after_command`] to restore.
pub fn before_command(ctx: &mut Ctx) -> usize {
    let outer = std::mem::replace(&mut ctx.srv.notify_reply_start, ctx.out.buf.len());
    if !ctx.srv.in_script_call {
        ctx.srv.notify_self_resp = ctx.client.resp;
    }
    publish_recorded(ctx);
    outer
}

/// After a command's handler: events recorded by its reads (lazy expiry, misses), then,
/// once the outermost reply is complete, the notifications held for the client itself.
pub fn after_command(ctx: &mut Ctx, outer_reply_start: usize) {
    publish_recorded_before_reply(ctx);
    ctx.srv.notify_reply_start = outer_reply_start;
    if !ctx.srv.notify_self.is_empty() && !ctx.srv.in_exec && !ctx.srv.in_script_call {
        let held = std::mem::take(&mut ctx.srv.notify_self);
        ctx.out.buf.extend_from_slice(&held);
        ctx.client.keep_output_to = Some(ctx.out.buf.len());
    }
}
