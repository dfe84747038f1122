//! Blocking commands (BLPOP, BRPOP, BLMOVE, BLMPOP, BRPOPLPUSH, BZPOPMIN, BZPOPMAX, BZMPOP):
//! Redis 7's model, generic over the command.
//!
//! A handler that finds its keys empty calls [`block`] instead of replying (after checking
//! [`may_block`]: inside EXEC, while loading, it must answer as if timed out). The pipeline
//! then **parks** the client: its command (owned copy of the arguments) waits in a
//! per-key FIFO of client ids, with its deadline in a sorted set. A parked client costs no
//! CPU: nothing polls it. Every command that changed data signals its written keys
//! ([`Server::signal_keys`]); a signalled key that clients wait on becomes **ready**.
//! After each top-level command (EXEC counts as one) [`Server::serve_ready`] serves
//! ready keys: while the key holds a value of the kind the waiters want, the first waiter
//! is unparked and its command **re-run** as if it had just arrived (its pop propagates
//! to the AOF in the non-blocking form the handler chooses). The re-run's reply, or the
//! timeout / CLIENT UNBLOCK reply, lands in [`Blocking::unblocked`], which the socket side
//! (event loop or I/O-thread executor) appends to the connection's output before
//! resuming the commands that were pipelined behind the blocked one.
//!
//! Bounds: one parked command per client, so every queue is bounded by `maxclients`.

use super::{Client, RefSeg, Server};
use crate::commands::{Args, CmdError, Ctx};
use crate::keyspace::Kind;
use crate::protocol::reply::Reply;
use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};

/// What a blocked client receives when its timeout passes (or CLIENT UNBLOCK TIMEOUT).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeoutReply {
    /// `*-1` (RESP3 `_`): what Redis 7.0 sends every timed-out list or sorted-set
    /// command (BLPOP, BRPOP, BLMPOP, BLMOVE, BRPOPLPUSH, BZPOPMIN, BZPOPMAX, BZMPOP).
    /// (A BLMOVE that may not block, inside MULTI, answers a null bulk instead.)
    NullArray,
    /// `$-1` (RESP3 `_`).
    NullBulk,
}

/// A handler's request to block (see [`block`]).
#[derive(Clone, Debug)]
pub struct BlockRequest {
    pub keys: Vec<Vec<u8>>,
    /// Absolute deadline (ms since the epoch); 0 waits forever.
    pub deadline_ms: i64,
    /// The value kind that serves the command: a ready key of another kind is skipped.
    pub kind: Kind,
    pub on_timeout: TimeoutReply,
}

/// A parked command.
struct Parked {
    slot: usize,
    db: usize,
    req: BlockRequest,
    /// The command's arguments, owned (the query buffer moves on).
    data: Vec<u8>,
    ranges: Vec<(usize, usize)>,
}

/// The reply of a command that was parked, ready for its connection.
pub struct Unblocked {
    pub slot: usize,
    pub client_id: u64,
    pub out: Vec<u8>,
    /// Value references in `out` (positions relative to `out`).
    pub refs: Vec<RefSeg>,
    /// `appendfsync always`: the LSN the reply waits for (0: none).
    pub hold_lsn: u64,
}

#[derive(Default)]
pub struct Blocking {
    /// Set by [`block`] during a handler; consumed by the pipeline.
    pub request: Option<BlockRequest>,
    /// Blocking is not allowed now (inside EXEC): handlers answer as on timeout.
    pub deny: bool,
    /// Re-running parked commands (no nested serving).
    serving: bool,
    /// (db, key) → ids of the clients waiting on it, first come first served.
    waiters: HashMap<(usize, Vec<u8>), VecDeque<u64>>,
    parked: HashMap<u64, Parked>,
    /// (deadline ms, client id) of parked commands with a timeout.
    deadlines: BTreeSet<(i64, u64)>,
    ready: VecDeque<(usize, Vec<u8>)>,
    ready_set: HashSet<(usize, Vec<u8>)>,
    /// Replies of unparked commands, for the socket side to deliver.
    pub unblocked: Vec<Unblocked>,
    /// Parked commands served by a re-run.
    pub total_served: u64,
}

impl Blocking {
    pub fn blocked_clients(&self) -> usize {
        self.parked.len()
    }
    pub fn timeout_table_len(&self) -> usize {
        self.deadlines.len()
    }
    pub fn blocking_keys(&self) -> usize {
        self.waiters.len()
    }
    pub fn is_parked(&self, client_id: u64) -> bool {
        self.parked.contains_key(&client_id)
    }
    /// The earliest deadline of a parked command (the loops sleep at most until then).
    pub fn next_deadline_ms(&self) -> Option<i64> {
        self.deadlines.first().map(|d| d.0)
    }
    /// True when nothing waits on any key (the write path's fast check).
    #[inline]
    pub fn no_waiters(&self) -> bool {
        self.waiters.is_empty()
    }

    /// Marks `key` ready if a client waits on it.
    pub fn signal(&mut self, db: usize, key: &[u8]) {
        if self.waiters.is_empty() {
            return;
        }
        let k = (db, key.to_vec());
        if self.waiters.contains_key(&k) && self.ready_set.insert(k.clone()) {
            self.ready.push_back(k);
        }
    }

    /// Marks every waited key of `db` ready (SWAPDB brought in a whole other keyspace).
    pub fn signal_db(&mut self, db: usize) {
        let keys: Vec<(usize, Vec<u8>)> =
            self.waiters.keys().filter(|k| k.0 == db).cloned().collect();
        for k in keys {
            if self.ready_set.insert(k.clone()) {
                self.ready.push_back(k);
            }
        }
    }

    fn park(&mut self, client_id: u64, p: Parked) {
        for k in &p.req.keys {
            let q = self.waiters.entry((p.db, k.clone())).or_default();
            // BLPOP k k: one place in the queue.
            if !q.contains(&client_id) {
                q.push_back(client_id);
            }
        }
        if p.req.deadline_ms > 0 {
            self.deadlines.insert((p.req.deadline_ms, client_id));
        }
        self.parked.insert(client_id, p);
    }

    /// Removes a parked command from every queue. O(keys × waiters of each key).
    fn unpark(&mut self, client_id: u64) -> Option<Parked> {
        let p = self.parked.remove(&client_id)?;
        for k in &p.req.keys {
            let kk = (p.db, k.clone());
            if let Some(q) = self.waiters.get_mut(&kk) {
                q.retain(|&c| c != client_id);
                if q.is_empty() {
                    self.waiters.remove(&kk);
                }
            }
        }
        if p.req.deadline_ms > 0 {
            self.deadlines.remove(&(p.req.deadline_ms, client_id));
        }
        Some(p)
    }
}

/// Parses a blocking command's timeout (seconds, fractional allowed; 0 = forever) into an
/// absolute deadline in ms (0 = forever), with Redis's errors.
pub fn parse_timeout(arg: &[u8], now_ms: i64) -> Result<i64, CmdError> {
    let secs = crate::util::parse_f64(arg)
        .ok_or_else(|| CmdError::err("timeout is not a float or out of range"))?;
    let ms = (secs * 1000.0).ceil();
    // Redis converts an infinite timeout to a negative integer: same error.
    if !ms.is_finite() {
        return Err(CmdError::err("timeout is negative"));
    }
    if ms > i64::MAX as f64 {
        return Err(CmdError::err("timeout is out of range"));
    }
    if ms < 0.0 {
        return Err(CmdError::err("timeout is negative"));
    }
    let ms = ms as i64;
    if ms == 0 {
        return Ok(0);
    }
    ms.checked_add(now_ms)
        .ok_or_else(|| CmdError::err("timeout is out of range"))
}

/// May the command being run block? Not inside EXEC (Redis answers as on timeout), not
/// while replaying the AOF, not for the AOF's own client.
pub fn may_block(ctx: &Ctx) -> bool {
    !ctx.srv.blocking.deny && !ctx.srv.loading
}

/// Asks the pipeline to park the current command on `keys` (the handler writes no reply).
/// Call only when [`may_block`] is true.
pub fn block(ctx: &mut Ctx, keys: Vec<Vec<u8>>, deadline_ms: i64, kind: Kind, on: TimeoutReply) {
    ctx.srv.blocking.request = Some(BlockRequest {
        keys,
        deadline_ms,
        kind,
        on_timeout: on,
    });
}

fn timeout_reply(out: &mut Vec<u8>, resp: crate::protocol::reply::Resp, on: TimeoutReply) {
    let mut r = Reply::new(out, resp);
    match on {
        TimeoutReply::NullArray => r.null_array(),
        TimeoutReply::NullBulk => r.null(),
    }
}

impl Server {
    /// Called by the pipeline after a handler asked to block: parks `client`'s command.
    pub(crate) fn park_client(&mut self, client: &mut Client, args: Args, req: BlockRequest) {
        let mut data = Vec::new();
        let mut ranges = Vec::with_capacity(args.len());
        for a in args.iter() {
            ranges.push((data.len(), a.len()));
            data.extend_from_slice(a);
        }
        client.blocked = true;
        let p = Parked {
            slot: client.slot,
            db: client.db,
            req,
            data,
            ranges,
        };
        self.blocking.park(client.id, p);
    }

    /// The write hook: keys a command changed (or created) may serve waiting clients.
    pub fn signal_key(&mut self, db: usize, key: &[u8]) {
        self.blocking.signal(db, key);
    }

    /// Serves ready keys (after a top-level command). Each ready key serves its waiters
    /// in arrival order while it still holds a value of the kind they want; the commands
    /// these re-runs run may make further keys ready (BLMOVE's destination), served in
    /// the same call.
    pub fn serve_ready(&mut self) {
        if self.blocking.serving || self.blocking.ready.is_empty() {
            return;
        }
        self.blocking.serving = true;
        // The caller's reply references are its own.
        let saved_refs = std::mem::take(&mut self.reply_refs);
        let saved_min = self.reply_refs_min;
        // The caller's reply waits for its own LSN, whatever the re-runs log.
        let saved_hold = self.aof.hold_lsn;
        let now = crate::util::now_ms();
        while let Some(k) = self.blocking.ready.pop_front() {
            self.blocking.ready_set.remove(&k);
            while let Some(&id) = self.blocking.waiters.get(&k).and_then(|q| q.front()) {
                let Some(kind) = self.blocking.parked.get(&id).map(|p| p.req.kind) else {
                    break;
                };
                let serves = self
                    .ks
                    .find(k.0, &k.1, now)
                    .is_some_and(|e| self.ks.kind(e) == kind);
                if !serves {
                    break;
                }
                let Some(p) = self.blocking.unpark(id) else {
                    break;
                };
                let Some(mut client) = self.clients.get_mut(p.slot).and_then(|c| c.take()) else {
                    continue;
                };
                client.blocked = false;
                let mut out = Vec::new();
                let mut refs = Vec::new();
                self.begin_batch();
                let req = p.req.clone();
                self.execute_refs(
                    &mut client,
                    Args::new(&p.data, &p.ranges),
                    &mut out,
                    &mut refs,
                );
                let hold_lsn = self.aof.hold_lsn;
                if client.blocked {
                    // Asked to block again (another kind of value took the key): it keeps
                    // its original deadline, at the back of the queues.
                    self.blocking.request = None;
                    self.release_refs(refs);
                    let mut p2 = p;
                    p2.req = req;
                    self.blocking.park(client.id, p2);
                } else {
                    self.blocking.total_served += 1;
                    self.blocking.unblocked.push(Unblocked {
                        slot: client.slot,
                        client_id: client.id,
                        out,
                        refs,
                        hold_lsn,
                    });
                }
                let slot = client.slot;
                self.clients[slot] = Some(client);
            }
        }
        self.reply_refs = saved_refs;
        self.reply_refs_min = saved_min;
        self.aof.hold_lsn = saved_hold;
        self.blocking.serving = false;
    }

    /// Unparks the clients whose deadline has passed, with their timeout reply.
    pub fn expire_blocked(&mut self, now_ms: i64) {
        while let Some(&(d, id)) = self.blocking.deadlines.first() {
            if d > now_ms {
                break;
            }
            self.unblock_with(id, false);
        }
    }

    /// CLIENT UNBLOCK: unparks `client_id` with its timeout reply, or with an
    /// `-UNBLOCKED` error. False when it was not blocked.
    pub fn unblock_with(&mut self, client_id: u64, error: bool) -> bool {
        let Some(p) = self.blocking.unpark(client_id) else {
            return false;
        };
        let mut out = Vec::new();
        if let Some(c) = self.clients.get_mut(p.slot).and_then(|c| c.as_mut()) {
            c.blocked = false;
            if error {
                out.extend_from_slice(b"-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n");
                self.stats
                    .record_error(b"UNBLOCKED client unblocked via CLIENT UNBLOCK");
            } else {
                timeout_reply(&mut out, c.resp, p.req.on_timeout);
            }
        }
        self.blocking.unblocked.push(Unblocked {
            slot: p.slot,
            client_id,
            out,
            refs: Vec::new(),
            hold_lsn: 0,
        });
        true
    }

    /// A client is gone: forget its parked command, its watched keys and any reply
    /// waiting for it.
    pub fn forget_client(&mut self, client: &mut Client) {
        self.blocking.unpark(client.id);
        client.blocked = false;
        let id = client.id;
        let mut gone = Vec::new();
        self.blocking.unblocked.retain_mut(|u| {
            if u.client_id == id {
                gone.append(&mut u.refs);
                false
            } else {
                true
            }
        });
        self.release_refs(gone);
        crate::commands::transactions::unwatch_all(self, client);
        client.multi = None;
    }
}
