//! Client-side caching on the executor: remembering what tracking clients read, and
//! delivering the invalidations the keyspace's tracking table records
//! (`keyspace::tracking`) as Redis 7.0's sendTrackingMessage does:
//!
//! - to the client itself in RESP3, as a push `invalidate [keys]`;
//! - with REDIRECT, to the target: a push if it speaks RESP3, a pub/sub message on
//!   `__redis__:invalidate` if it is a RESP2 subscriber, nothing otherwise; a target that
//!   went away marks the client's redirect broken (and tells it, in RESP3);
//! - a RESP2 client without REDIRECT gets nothing (RESP2 has no pushes on a request
//!   connection).
//!
//! The running client's own invalidations go after its reply (Redis's
//! tracking_pending_keys); others' go to their outboxes at once. BCAST prefixes are
//! delivered once per executor turn (Redis's beforeSleep).

use super::{Client, Server};
use crate::commands::{self, Args, CommandSpec};
use crate::keyspace::tracking::Pending;
use crate::protocol::reply::{Reply, Resp};

const INVALIDATE_CHANNEL: &[u8] = b"__redis__:invalidate";

/// What an invalidation says: one key, the keys of a BCAST turn, or "all keys" (after a
/// flush: a null in the protocol of the tracking client).
enum Payload<'a> {
    Key(&'a [u8]),
    Keys(&'a [&'a [u8]]),
    All(Resp),
}

fn encode_payload(buf: &mut Vec<u8>, resp: Resp, payload: &Payload) {
    match payload {
        Payload::Key(k) => {
            let mut r = Reply::new(buf, resp);
            r.array(1);
            r.bulk(k);
        }
        Payload::Keys(keys) => {
            let mut r = Reply::new(buf, resp);
            r.array(keys.len());
            for k in keys.iter() {
                r.bulk(k);
            }
        }
        Payload::All(Resp::V2) => buf.extend_from_slice(b"$-1\r\n"),
        Payload::All(Resp::V3) => buf.extend_from_slice(b"_\r\n"),
    }
}

/// Where a message for a client goes: the running client's reply, or another's outbox.
enum Dest {
    Current,
    Slot(usize),
}

impl Server {
    /// Before a command runs: which client is running (for NOLOOP and its own
    /// invalidations), and the table kept within `tracking-table-max-keys`.
    pub(super) fn tracking_before_command(&mut self, client: &mut Client, out: &mut Vec<u8>) {
        if self.ks.tracking.is_off() {
            return;
        }
        self.ks.tracking.current = 0;
        let max = self.config.settings().tracking_table_max_keys;
        self.ks.tracking.limit_keys(max as usize);
        if self.ks.tracking.has_pending() {
            self.deliver_invalidations(Some(client), out);
        }
        self.ks.tracking.current = client.id;
    }

    /// After a top-level command: the invalidations it caused, its own after its reply;
    /// CLIENT CACHING's one-command effect ends (unless in MULTI, or the command was
    /// CLIENT itself).
    pub(super) fn tracking_after_command(
        &mut self,
        client: &mut Client,
        args: Args,
        out: &mut Vec<u8>,
    ) {
        if self.ks.tracking.has_pending() {
            self.deliver_invalidations(Some(client), out);
        }
        self.ks.tracking.current = 0;
        if let Some(t) = client.tracking.as_mut() {
            if client.multi.is_none() && !args.get(0).eq_ignore_ascii_case(b"client") {
                t.caching = false;
            }
        }
    }

    /// Once per executor turn: invalidations from outside commands (active expiry,
    /// eviction in cron) and the BCAST prefixes' keys.
    pub fn tracking_end_of_turn(&mut self) {
        if self.ks.tracking.is_off() {
            return;
        }
        self.ks.tracking.current = 0;
        let mut none = Vec::new();
        if self.ks.tracking.has_pending() {
            self.deliver_invalidations(None, &mut none);
        }
        for (followers, keys) in self.ks.tracking.take_broadcasts() {
            for id in followers {
                let Some(slot) = self.ks.tracking.slot_of(id) else {
                    continue;
                };
                let noloop = self
                    .client_at(slot, id)
                    .and_then(|c| c.tracking.as_ref())
                    .is_some_and(|t| t.noloop);
                let list: Vec<&[u8]> = keys
                    .iter()
                    .filter(|(_, by)| !(noloop && *by == id))
                    .map(|(k, _)| k.as_slice())
                    .collect();
                if list.is_empty() {
                    continue;
                }
                self.send_tracking(None, &mut none, id, Dest::Slot(slot), &Payload::Keys(&list));
            }
        }
    }

    /// Remembers the keys a read-only command read, for a tracking client (Redis's
    /// trackingRememberKeys, called from `run_command`). Inside a script the keys are the
    /// script's declared keys, remembered when the script returns (`script_read_seen`).
    pub(super) fn tracking_remember(&mut self, client: &Client, spec: &CommandSpec, args: Args) {
        let Some(t) = client.tracking.as_ref() else {
            return;
        };
        if !t.remembers_reads() {
            return;
        }
        if self.in_script_call {
            self.script_read_seen = true;
            return;
        }
        if spec.flags & commands::PUBSUB != 0 {
            return;
        }
        if let Some(keys) = commands::propagate::keys_of(spec, args) {
            for i in keys {
                if i < args.len() {
                    self.ks.tracking.remember(client.id, args.get(i));
                }
            }
        }
    }

    /// A script that ran read commands returned: its declared keys are remembered.
    pub(super) fn tracking_remember_script(
        &mut self,
        client: &Client,
        spec: &CommandSpec,
        args: Args,
    ) {
        if !std::mem::take(&mut self.script_read_seen) {
            return;
        }
        let Some(t) = client.tracking.as_ref() else {
            return;
        };
        if !t.remembers_reads() {
            return;
        }
        if let Some(keys) = commands::propagate::keys_of(spec, args) {
            for i in keys {
                self.ks.tracking.remember(client.id, args.get(i));
            }
        }
    }

    /// CLIENT TRACKING OFF, RESET, a disconnect: the client stops tracking.
    pub fn tracking_disable(&mut self, client: &mut Client) {
        if let Some(t) = client.tracking.take() {
            self.ks.tracking.disable(client.id, &t.prefixes);
        }
    }

    /// Client `id` at `slot`, if that slot still holds it (slots are reused).
    fn client_at(&self, slot: usize, id: u64) -> Option<&Client> {
        self.clients
            .get(slot)
            .and_then(|c| c.as_deref())
            .filter(|c| c.id == id)
    }

    fn deliver_invalidations(&mut self, mut current: Option<&mut Client>, out: &mut Vec<u8>) {
        let current_id = current.as_ref().map_or(0, |c| c.id);
        for p in self.ks.tracking.take_pending() {
            match p {
                Pending::Key { key, ids } => {
                    for id in ids {
                        let dest = if id == current_id {
                            Dest::Current
                        } else {
                            match self.ks.tracking.slot_of(id) {
                                Some(slot) => Dest::Slot(slot),
                                None => continue,
                            }
                        };
                        let mode = match &dest {
                            Dest::Current => current.as_ref().and_then(|c| c.tracking.as_ref()),
                            Dest::Slot(slot) => {
                                self.client_at(*slot, id).and_then(|c| c.tracking.as_ref())
                            }
                        };
                        // A client that switched to BCAST since it read the key is told
                        // through its prefixes only; NOLOOP skips its own changes.
                        let skip = match mode {
                            None => true,
                            Some(t) => t.bcast || (t.noloop && id == current_id),
                        };
                        if skip {
                            continue;
                        }
                        self.send_tracking(
                            current.as_deref_mut(),
                            out,
                            id,
                            dest,
                            &Payload::Key(&key),
                        );
                    }
                }
                Pending::Flush => {
                    let all: Vec<(u64, usize)> = self.ks.tracking.clients().collect();
                    for (id, slot) in all {
                        let (dest, resp) = if id == current_id {
                            (Dest::Current, current.as_ref().map_or(Resp::V2, |c| c.resp))
                        } else {
                            match self.client_at(slot, id) {
                                Some(c) => (Dest::Slot(slot), c.resp),
                                None => continue,
                            }
                        };
                        self.send_tracking(
                            current.as_deref_mut(),
                            out,
                            id,
                            dest,
                            &Payload::All(resp),
                        );
                    }
                }
            }
        }
    }

    /// Sends one invalidation for tracking client `id` (at `dest`), following its
    /// redirect.
    fn send_tracking(
        &mut self,
        current: Option<&mut Client>,
        out: &mut Vec<u8>,
        id: u64,
        dest: Dest,
        payload: &Payload,
    ) {
        let (redirect, redirect_slot) = {
            let c = match &dest {
                Dest::Current => current.as_deref(),
                Dest::Slot(slot) => self.client_at(*slot, id),
            };
            match c.and_then(|c| c.tracking.as_ref()) {
                Some(t) => (t.redirect, t.redirect_slot),
                None => return,
            }
        };
        if redirect == 0 {
            let (resp, buf) = match dest {
                Dest::Current => match current {
                    Some(c) => (c.resp, None),
                    None => return,
                },
                Dest::Slot(slot) => (
                    self.client_at(slot, id).map_or(Resp::V2, |c| c.resp),
                    Some(slot),
                ),
            };
            if resp == Resp::V2 {
                return;
            }
            let mut msg = Vec::new();
            Reply::new(&mut msg, Resp::V3).push(2);
            Reply::new(&mut msg, Resp::V3).bulk(b"invalidate");
            encode_payload(&mut msg, Resp::V3, payload);
            match buf {
                None => out.extend_from_slice(&msg),
                Some(slot) => self.push_to(slot, &msg),
            }
            return;
        }
        // Redirected: find the target (the running client, or one in the table).
        let target = if current.as_ref().is_some_and(|c| c.id == redirect) {
            Some((
                Dest::Current,
                current.as_ref().map(|c| (c.resp, c.is_pubsub())),
            ))
        } else {
            self.client_at(redirect_slot, redirect)
                .map(|c| (Dest::Slot(redirect_slot), Some((c.resp, c.is_pubsub()))))
        };
        let Some((tdest, Some((tresp, tpubsub)))) = target else {
            // The target is gone: the redirect is broken, and a RESP3 client hears it.
            let c = match dest {
                Dest::Current => current,
                Dest::Slot(slot) => self
                    .clients
                    .get_mut(slot)
                    .and_then(|c| c.as_deref_mut())
                    .filter(|c| c.id == id),
            };
            let Some(c) = c else {
                return;
            };
            let resp = c.resp;
            if let Some(t) = c.tracking.as_mut() {
                t.broken_redirect = true;
            }
            if resp == Resp::V3 {
                let mut msg = Vec::new();
                let mut r = Reply::new(&mut msg, Resp::V3);
                r.push(2);
                r.bulk(b"tracking-redir-broken");
                r.int(redirect as i64);
                match dest {
                    Dest::Current => out.extend_from_slice(&msg),
                    Dest::Slot(slot) => self.push_to(slot, &msg),
                }
            }
            return;
        };
        let mut msg = Vec::new();
        if tresp == Resp::V3 {
            Reply::new(&mut msg, Resp::V3).push(2);
            Reply::new(&mut msg, Resp::V3).bulk(b"invalidate");
        } else if tpubsub {
            let mut r = Reply::new(&mut msg, Resp::V2);
            r.array(3);
            r.bulk(b"message");
            r.bulk(INVALIDATE_CHANNEL);
        } else {
            return;
        }
        encode_payload(&mut msg, tresp, payload);
        match tdest {
            Dest::Current => out.extend_from_slice(&msg),
            Dest::Slot(slot) => self.push_to(slot, &msg),
        }
    }

    /// Appends `msg` to the outbox of the client at `slot` (the id checked by the
    /// callers), within the output limit of its class.
    fn push_to(&mut self, slot: usize, msg: &[u8]) {
        let Some((id, pubsub)) = self
            .clients
            .get(slot)
            .and_then(|c| c.as_deref())
            .map(|c| (c.id, c.is_pubsub()))
        else {
            return;
        };
        let s = self.config.settings();
        let lim = if pubsub { s.obuf_pubsub } else { s.obuf_normal };
        crate::commands::pubsub::push_to_outbox(self, slot, id, lim, |buf, _| {
            buf.extend_from_slice(msg)
        });
    }
}
